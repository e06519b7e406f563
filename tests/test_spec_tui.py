"""The chat status line reports the last answer's speculative drafts (pilot, stories260K, CPU)."""

from __future__ import annotations

import re

from test_tui_app import SIZE, options, send

from localllm.config import EngineConfig
from localllm.tui.app import ChatApp

STORY = "Lily saw a red ball. Lily was happy. Lily played with a red ball all day. " * 2


async def test_status_line_shows_accepted_drafts(tmp_path, stories_path):
    config = lambda p: EngineConfig(model=p, device="cpu", num_kv_blocks=256, spec_tokens=4)
    app = ChatApp(options(tmp_path, model=str(stories_path), engine_config=config))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, STORY)
        status = str(app.query_one("#status").render())
        m = re.search(r"spec (\d+)/(\d+) accepted", status)
        assert m is not None, status
        accepted, drafted = int(m.group(1)), int(m.group(2))
        assert 0 <= accepted <= drafted and drafted > 0
