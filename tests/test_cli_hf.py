"""`localllm generate` on a Hugging Face folder, as a user runs it: same text as the GGUF."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hf_build import build_hf_folder


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
