"""`localllm chat` in a real terminal (tmux): type a message, read the answer off the screen."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid

import pytest

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)"
)

QUESTION = "Tell me a story about a dog"


def greedy_answer(model: str, max_tokens: int) -> str:
    """The answer the chat must show: same template, same greedy decoding, straight from the engine."""
    eng = LLMEngine(EngineConfig(model=model, device="cpu", num_kv_blocks=64))
    text = eng.chat_template.render([{"role": "user", "content": QUESTION}])
    ids = eng.tokenizer.encode(text, add_special=not eng.chat_template.renders_bos)
    rid = eng.add_request(
        ids, SamplingParams(max_tokens=max_tokens, temperature=0.0), continuation=False
    )
    out = ""
    while eng.has_work():
        out += "".join(ev.text for ev in eng.step() if ev.request_id == rid)
    return out


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def wait_screen(session: str, needle: str, timeout: float = 60.0) -> str:
    t0 = time.monotonic()
    screen = ""
    while time.monotonic() - t0 < timeout:
        screen = tmux("capture-pane", "-p", "-t", session)
        if needle in screen:
            return screen
        time.sleep(0.3)
    raise AssertionError(f"{needle!r} never appeared; the screen was:\n{screen}")


def test_chat_in_tmux(tmp_path, stories_path):
    words = greedy_answer(str(stories_path), 32).split()
    assert len(words) >= 4
    session = f"localllm-test-{uuid.uuid4().hex[:8]}"
    cmd = [
        sys.executable,
        "-m",
        "localllm.cli",
        "chat",
        "--model",
        str(stories_path),
        "--device",
        "cpu",
        "--db",
        str(tmp_path / "chat.db"),
        "-t",
        "0",
        "-n",
        "32",
    ]
    tmux(
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        "110",
        "-y",
        "32",
        "env",
        "TERM=xterm-256color",
        *cmd,
    )
    try:
        wait_screen(session, "ready")
        tmux("send-keys", "-t", session, "-l", QUESTION)
        time.sleep(0.3)
        tmux("send-keys", "-t", session, "Enter")
        screen = wait_screen(session, "tok/s")
        assert QUESTION in screen
        assert " ".join(words[:4]) in screen, screen
        tmux("send-keys", "-t", session, "C-q")
        t0 = time.monotonic()
        while session in subprocess.run(["tmux", "ls"], capture_output=True, text=True).stdout:
            assert time.monotonic() - t0 < 15, "localllm chat did not quit on Ctrl+Q"
            time.sleep(0.2)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
