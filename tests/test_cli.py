"""`localllm generate` driven as a user would: a subprocess, stdout, stderr and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from gguf import GGMLQuantizationType as Q

from localllm.formats.synthetic import SyntheticSpec, UniformRule, write_synthetic


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "localllm.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",  # never import from a source checkout by accident
    )


def test_generate_prints_golden_text(testdata):
    gold = json.loads((testdata / "golden" / "stories260K_greedy.json").read_text())
    r = _run(
        "generate",
        "--model",
        str(testdata / "models" / "stories260K.gguf"),
        "--prompt",
        "",
        "--max-tokens",
        "200",
        "--temperature",
        "0",
    )
    assert r.returncode == 0, r.stderr
    # the golden's text concatenates raw pieces: its byte tokens appear as "<0x0A>"; we print bytes
    expected = re.sub(
        r"<0x([0-9A-F]{2})>", lambda m: chr(int(m.group(1), 16)), gold["text"]
    ).strip()
    assert r.stdout.strip() == expected
    summary = r.stderr.strip().splitlines()[-1]
    assert "prompt 1 tokens" in summary and "generated 200 tokens" in summary and "tok/s" in summary


def test_generate_chat_and_sampling_flags(testdata):
    args = [
        "generate",
        "--model",
        str(testdata / "models" / "stories260K.gguf"),
        "--prompt",
        "Lily",
        "--max-tokens",
        "20",
        "--temperature",
        "0.8",
        "--top-p",
        "0.9",
        "--top-k",
        "40",
        "--seed",
        "7",
    ]
    a, b = _run(*args), _run(*args)
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout.strip()
    c = _run(*args, "--chat")
    assert c.returncode == 0, c.stderr


def _assert_one_line_error(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_bad_model_files(tmp_path, testdata):
    missing = tmp_path / "nope.gguf"
    _assert_one_line_error(
        _run("generate", "-m", str(missing), "-p", "x"), str(missing), "no such file"
    )
    text = tmp_path / "text.gguf"
    text.write_text("hello, I am not a model\n" * 10)
    _assert_one_line_error(_run("generate", "-m", str(text), "-p", "x"), str(text), "not a GGUF")
    real = (testdata / "models" / "stories260K.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(real[: len(real) // 2])
    _assert_one_line_error(_run("generate", "-m", str(cut), "-p", "x"), str(cut), "truncated")


def test_bad_pdl_setting_is_one_line(testdata):
    """LOCALLLM_PDL (kernels/pdl.py) takes 0 or 1; anything else stops the start with one line."""
    model = str(testdata / "models" / "stories260K.gguf")
    r = subprocess.run(
        [sys.executable, "-m", "localllm.cli", "generate", "-m", model, "-p", "x", "-n", "2"],
        capture_output=True, text=True, timeout=300, cwd="/",
        env={**os.environ, "LOCALLLM_PDL": "yes"},
    )  # fmt: skip
    _assert_one_line_error(r, "LOCALLLM_PDL='yes': expected one of 0, 1")


def _tiny(tmp_path, name: str, **kw) -> str:
    spec = SyntheticSpec(
        name=name,
        vocab=300,
        dim=64,
        n_layers=1,
        n_heads=4,
        n_kv_heads=2,
        ffn=128,
        tensor_type=UniformRule(kw.pop("qtype", Q.F32)),
        **kw,
    )
    return str(write_synthetic(spec, tmp_path / f"{name}.gguf"))


def test_unsupported_architecture_and_quant(tmp_path):
    path = _tiny(tmp_path, "arch")
    data = bytearray(open(path, "rb").read())
    i = data.find(
        b"llama"
    )  # general.architecture value; patch it to an unknown arch of equal length
    data[i : i + 5] = b"mamba"
    bad = tmp_path / "mamba.gguf"
    bad.write_bytes(bytes(data))
    _assert_one_line_error(_run("generate", "-m", str(bad), "-p", "x"), str(bad), "architecture")

    # a quant type we do not implement, written as a real tensor type id
    iq = _tiny(tmp_path, "iq", qtype=Q.Q8_0)
    raw = bytearray(open(iq, "rb").read())
    name = b"blk.0.attn_q.weight"
    j = raw.find(name) + len(name)
    # tensor info: name, n_dims (u32), dims (u64 each), type (u32)
    nd = int.from_bytes(raw[j : j + 4], "little")
    t = j + 4 + 8 * nd
    assert int.from_bytes(raw[t : t + 4], "little") == int(Q.Q8_0)
    raw[t : t + 4] = int(Q.IQ4_NL).to_bytes(4, "little")  # same 32-element blocks, different size
    unsupported = tmp_path / "iq.gguf"
    unsupported.write_bytes(bytes(raw))
    _assert_one_line_error(
        _run("generate", "-m", str(unsupported), "-p", "x"),
        str(unsupported),
        "unsupported quant type IQ4_NL",
    )


def test_prompt_longer_than_context(testdata):
    r = _run(
        "generate",
        "-m",
        str(testdata / "models" / "stories260K.gguf"),
        "-p",
        "Lily " * 300,
        "--max-model-len",
        "128",
        "--max-tokens",
        "4",
    )
    _assert_one_line_error(r, "context length")


@pytest.mark.parametrize("cmd", [["--help"], ["generate", "--help"]])
def test_help(cmd):
    r = _run(*cmd)
    assert r.returncode == 0 and "usage" in r.stdout
