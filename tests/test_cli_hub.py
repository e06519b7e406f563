"""`localllm pull | list | info | rm` and `--model REPO:QUANT`, driven as a user would,
against a fake Hub on loopback (HF_ENDPOINT): a few real subprocesses, the rest through
`localllm.cli.main` in this process (the same code, without a torch import per call)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fake_hub import FakeHub
from huggingface_hub import constants

from localllm.cli import main

REPO = "me/stories-GGUF"


@pytest.fixture
def hub(stories_path: Path):
    data = stories_path.read_bytes()
    with FakeHub() as h:
        h.add_repo(REPO, {"stories-Q8_0.gguf": data, "stories-F32.gguf": data, "README.md": b"x"})
        yield h


@pytest.fixture
def env(tmp_path: Path, hub: FakeHub) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    for k in ("XDG_CACHE_HOME", "LLAMA_CACHE", "OLLAMA_MODELS", "LOCALLLM_MODELS"):
        keep.pop(k, None)
    return {
        **keep,
        "HOME": str(tmp_path / "home"),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_ENDPOINT": hub.url,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
    }


def cli(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "localllm.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        input=stdin,
        cwd="/",
    )


@pytest.fixture
def run(env, monkeypatch, capsys):
    """localllm.cli.main in-process with `env` (as a subprocess would see it)."""
    for k in list(os.environ):
        if k not in env:
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(constants, "ENDPOINT", env["HF_ENDPOINT"])  # read at import otherwise

    def call(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return call


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("localllm: error: "), r.stderr
    return lines[0]


def test_pull_list_info_rm(env, run, tmp_path, stories_path):
    r = cli(env, "pull", f"{REPO}:q8_0")  # a real process: progress bars, exit code
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{REPO}:q8_0: downloaded, 1.1 MB in 1 file(s)\n")
    cached = tmp_path / "hf/hub/models--me--stories-GGUF/snapshots"
    assert str(cached) in r.stdout
    assert "already up to date" in run("pull", f"{REPO}:Q8_0").stdout

    r = run("list")
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()
    assert header.split() == ["NAME", "SOURCE", "ARCH", "QUANT", "SIZE", "CONTEXT"]
    assert row.split() == [
        f"{REPO}/stories-Q8_0.gguf",
        "huggingface",
        "llama",
        "F32",
        "1.1",
        "MB",
        "2048",
    ]
    (listed,) = json.loads(run("list", "--json").stdout)
    assert listed["size"] == stories_path.stat().st_size and listed["context"] == 2048

    for ref in (f"{REPO}/stories-Q8_0.gguf", f"{REPO}:Q8_0", "stories-Q8_0"):
        r = run("info", ref, "--max-model-len", "100")
        assert r.returncode == 0, r.stderr
        assert "memory for a 100-token context" in r.stdout
        assert "  KV fp16       640 B/token" in r.stdout  # 5 layers x K,V x 4 heads x 8 x 2 B
        assert "GPU: none" in r.stdout or "GPU: " in r.stdout

    r = run("rm", f"{REPO}:Q8_0", stdin="n\n")
    assert r.returncode == 1 and "nothing deleted" in r.stderr
    assert "will delete:\n  me/stories-GGUF/stories-Q8_0.gguf  (huggingface, 1.1 MB)" in r.stdout
    r = run("rm", f"{REPO}:Q8_0", stdin="y\n")
    assert r.returncode == 0 and "deleted 1 model(s), freed 1.1 MB" in r.stdout, r.stderr
    assert "No models were found" in run("list").stdout
    assert not (tmp_path / "hf/hub/models--me--stories-GGUF").exists()


def test_errors_are_one_line(env, run, tmp_path, monkeypatch):
    line = one_line_error(cli(env, "pull", f"{REPO}:Q5_K_M"))  # a real process
    assert line.endswith("me/stories-GGUF has no Q5_K_M GGUF file (quants: F32, Q8_0)")
    line = one_line_error(run("pull", "not a ref"))
    assert "not a Hugging Face reference" in line
    one_line_error(run("pull", "me/nothing"))
    line = one_line_error(run("rm", "-y", "nothing-here"))
    assert line.endswith("nothing-here: no such model in `localllm list`")
    line = one_line_error(run("info", str(tmp_path / "missing.gguf")))
    assert "missing.gguf: no such file" in line
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", closed)
    line = one_line_error(run("pull", f"{REPO}/stories-Q8_0.gguf"))
    folder = tmp_path / "home/.cache/localllm/models/me/stories-GGUF"
    assert f"cannot reach the Hugging Face Hub at {closed}" in line
    assert f"download stories-Q8_0.gguf from https://huggingface.co/{REPO} into {folder}/" in line


def test_generate_pulls_a_hub_reference_on_first_use(env, run, tmp_path, testdata):
    gold = json.loads((testdata / "golden" / "stories260K_greedy.json").read_text())
    args = ("generate", "--model", f"hf.co/{REPO}:Q8_0", "--prompt", "", "--max-tokens", "12")
    r = cli(env, *args, "--temperature", "0")
    assert r.returncode == 0, r.stderr
    assert gold["text"].strip().startswith(r.stdout.strip()) and len(r.stdout.strip()) > 20
    assert "generated 12 tokens" in r.stderr.strip().splitlines()[-1]
    assert (tmp_path / "hf/hub/models--me--stories-GGUF/refs/main").exists()
    r = run("generate", "--model", "me/missing:Q4_K_M", "--prompt", "x")
    assert one_line_error(r).endswith(
        "me/missing: no such model repository on "
        + env["HF_ENDPOINT"]
        + " (a private one needs `hf auth login` or HF_TOKEN)"
    )


def test_serve_names_the_model_by_file_and_by_reference(stories_path):
    import argparse

    from localllm.cli.serve import settings_from_args

    args = argparse.Namespace(
        model=str(stories_path),
        model_reference=f"{REPO}:Q8_0",
        served_model_name=None,
        api_key=None,
        cors_origin=[],
        max_n=16,
        strict_model_name=True,
        host="127.0.0.1",
        port=8000,
        allowed_host=[],
    )
    s = settings_from_args(args)
    assert s.model_name == "stories260K"
    assert set(s.aliases) == {"stories260K.gguf", f"{REPO}:Q8_0"}
