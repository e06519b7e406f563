"""Regenerate docs/chat-main.svg and docs/chat-settings.svg from a real pilot run:

    python -m localllm.tui.screenshots path/to/stories260K.gguf [docs-folder]

Uses a throw-away conversation database; the answers are the model's, greedy.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from localllm.config import EngineConfig
from localllm.tui.app import ChatApp, ChatOptions
from localllm.tui.backend import ChatSettings
from localllm.tui.widgets import ChatInput

QUESTIONS = ("Tell me a story about a cat", "What did the cat find in the garden?")


async def _wait(pilot, cond, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if cond():
            return
        await pilot.pause(0.05)
    raise TimeoutError("the chat did not get there in time")


async def take(model: str, out: Path, size: tuple[int, int] = (110, 36)) -> list[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        opts = ChatOptions(
            model=model,
            db_path=Path(tmp) / "chat.db",
            engine_config=lambda p: EngineConfig(model=p, device="cpu"),
            settings=ChatSettings(temperature=0.0, top_p=1.0, max_tokens=48),
            system_prompt="You are a storyteller.",
        )
        app = ChatApp(opts)
        async with app.run_test(size=size) as pilot:
            await _wait(pilot, lambda: app.backend is not None)
            for q in QUESTIONS:
                app.query_one("#input", ChatInput).text = q
                await pilot.press("enter")
                await _wait(pilot, lambda: app.reply_worker is not None and not app.busy)
                await pilot.pause(0.3)
            main = Path(app.save_screenshot("chat-main.svg", str(out)))
            await pilot.press("ctrl+s")
            await pilot.pause(0.3)
            settings = Path(app.save_screenshot("chat-settings.svg", str(out)))
            await pilot.press("escape")
    return [main, settings]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(args[1] if len(args) > 1 else "docs")
    for path in asyncio.run(take(args[0], out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
