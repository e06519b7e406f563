"""Hugging Face folders (fp16 and AWQ) driven as a user drives a GGUF file: `generate` (same
text as the GGUF for the fp16 folder), `serve` over HTTP and `chat` in the terminal UI."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import httpx
import pytest
from conftest import wait_for_health
from hf_build import build_hf_folder, quantize_folder


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "localllm.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from conftest import testdata_path

    gguf = testdata_path("models", "pycode-22m-q8_0.gguf")
    return gguf, build_hf_folder(gguf, tmp_path_factory.mktemp("cli") / "pycode-22m")


@pytest.fixture(scope="module")
def awq(folder, tmp_path_factory):
    return quantize_folder(folder[1], tmp_path_factory.mktemp("cli") / "pycode-22m-awq")


def test_generate_from_a_folder_prints_what_the_gguf_prints(folder):
    gguf, hf = folder
    args = [
        "generate",
        "--prompt",
        "import os\n\ndef main(",
        "--max-tokens",
        "24",
        "--temperature",
        "0",
    ]
    want, got = _run(*args, "--model", str(gguf)), _run(*args, "--model", str(hf))
    assert got.returncode == 0, got.stderr
    assert got.stdout == want.stdout and len(got.stdout) > 20
    assert "generated 24 tokens" in got.stderr.strip().splitlines()[-1]


def test_a_folder_we_cannot_run_is_one_line_and_exit_2(folder, tmp_path):
    _, hf = folder
    bad = tmp_path / "bad"
    bad.mkdir()
    cfg = json.loads((hf / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps(dict(cfg, architectures=["BertModel"])))
    r = _run("generate", "--model", str(bad), "--prompt", "x")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "unsupported architecture 'BertModel'" in lines[0], r.stderr


def test_generate_from_an_awq_folder(awq):
    from localllm.config import EngineConfig
    from localllm.core import SamplingParams
    from localllm.engine.engine import LLMEngine

    prompt = "import os\n\ndef main("
    r = _run(
        "generate",
        "--model",
        str(awq),
        "--prompt",
        prompt,
        "--max-tokens",
        "16",
        "--temperature",
        "0",
    )
    assert r.returncode == 0, r.stderr
    assert "generated 16 tokens" in r.stderr.strip().splitlines()[-1]
    eng = LLMEngine(EngineConfig(model=str(awq), device="cpu", max_num_seqs=2))
    [ids] = eng.generate([eng.encode_prompt(prompt)], SamplingParams(max_tokens=16, temperature=0))
    assert r.stdout.rstrip("\n") == eng.tokenizer.decode(ids, continuation=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_an_awq_folder(awq):
    port = _free_port()
    cmd = [sys.executable, "-m", "localllm.cli", "serve", "--model", str(awq), "--device", "cpu",
           "--port", str(port), "--max-model-len", "256", "--served-model-name", "pycode-awq"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(proc, url, 120, 0.2)
        assert [m["id"] for m in httpx.get(url + "/v1/models").json()["data"]] == ["pycode-awq"]
        body = {"model": "pycode-awq", "messages": [{"role": "user", "content": "def add(a, b):"}],
                "max_tokens": 8, "temperature": 0}  # fmt: skip
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["usage"]["completion_tokens"] == 8 and out["choices"][0]["message"]["content"]
        [tag] = httpx.get(url + "/api/tags").json()["models"]  # Ollama's listing of the folder
        assert (
            tag["details"]["format"] == "safetensors"
            and tag["details"]["quantization_level"] == "AWQ-4bit"
        )
        assert tag["details"]["family"] == "LlamaForCausalLM" and tag["size"] > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_chat_with_an_awq_folder(awq, tmp_path):
    from test_tui_app import SIZE, expected_answer, options, send, views

    from localllm.tui.app import ChatApp

    app = ChatApp(options(tmp_path, model=str(awq)))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "def fib(n):")
        (_, q), (role, answer) = views(app)
        assert role == "assistant" and answer
        assert answer == expected_answer(app.backend, [{"role": "user", "content": q}], 24)
        assert "pycode-22m-awq" in str(app.query_one("#status").render())
