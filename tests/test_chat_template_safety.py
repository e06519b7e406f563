"""Broken and hostile chat templates in model files: bounded renders, one-line errors, and
plain completions that never touch the template (the CLI's `--chat` falls back with a warning).
"""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gguf_edit import V, rewrite

from localllm import chat_template
from localllm.chat_sandbox import RenderLimits
from localllm.chat_template import ChatTemplate, TemplateError
from localllm.cli import main
from localllm.formats.gguf import GGUFFile
from localllm.tokenizer import Tokenizer

TIMEOUT_S = 1.0
HOSTILE = {
    "division": "{{ 1 / 0 }}",
    "syntax": "{% for m in messages %}{{ m.content }}",
    "recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "power": "{{ 10 ** (10 ** 10) }}",
    "repeat": "{{ 'x' * 10 ** 12 }}",
    "range": "{% for i in range(10 ** 9) %}{{ i }}{% endfor %}",
    "nested loops": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}"
        "{% endfor %}{% endfor %}{% endfor %}"
    ),
    "doubling": (
        "{% set ns = namespace(s='xx') %}{% for i in range(80) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s | length }}"
    ),
    "output": "{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}",
    "format width": "{{ '%999999999999d' % 1 }}",
    "sandbox": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
}
EXPECT = {
    "division": "ZeroDivisionError",
    "syntax": "syntax error",
    "recursion": "recursion",
    "power": "too large",
    "repeat": "too large",
    "range": "Range too big",
    "nested loops": f"longer than {TIMEOUT_S:g} s",
    "doubling": "",  # memory or size: either way one line
    "output": "output is longer",
    "format width": "too large",
    "sandbox": "unsafe",
}
USER = [{"role": "user", "content": "Hi"}]


@pytest.fixture(autouse=True)
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Templates made in these tests (and by the CLI in process) give up after TIMEOUT_S."""
    monkeypatch.setattr(
        chat_template, "RenderLimits", functools.partial(RenderLimits, timeout_s=TIMEOUT_S)
    )


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory) -> dict[str, Path]:
    from conftest import testdata_path

    src = testdata_path("models", "stories260K.gguf")
    d = tmp_path_factory.mktemp("templates")
    return {
        name: rewrite(
            src,
            d / f"{name.replace(' ', '_')}.gguf",
            kv={"tokenizer.chat_template": (source, V.STRING, None)},
        )
        for name, source in HOSTILE.items()
    }


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_template_fails_fast_with_one_line(name: str, hostile_files) -> None:
    g = GGUFFile(hostile_files[name])
    t0 = time.monotonic()
    template = ChatTemplate.from_metadata(g.metadata, Tokenizer.from_gguf_file(g))
    assert time.monotonic() - t0 < 0.5  # nothing is compiled or rendered at load
    with pytest.raises(TemplateError) as e:
        template.render(USER)
    elapsed = time.monotonic() - t0
    msg = str(e.value)
    assert "\n" not in msg and EXPECT[name] in msg and "'gguf'" in msg, msg
    assert elapsed < TIMEOUT_S + 3, elapsed
    assert template.renders_bos is False  # the probe fails quietly, once
    ok = ChatTemplate.builtin("chatml", Tokenizer.from_gguf_file(g))  # the renderer recovered
    assert ok.render(USER).startswith("<|im_start|>user\nHi")


def _generate(capsys, path: Path, *extra: str) -> tuple[int, str, str]:
    argv = ["generate", "--model", str(path), "-p", "Once", "-n", "8", "-t", "0", *extra]
    code = main([*argv, "--device", "cpu"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_plain_completion_never_renders_the_template(hostile_files, stories_path, capsys) -> None:
    _, want, _ = _generate(capsys, stories_path)
    for name in ("nested loops", "power", "recursion"):
        code, out, err = _generate(capsys, hostile_files[name])
        assert code == 0 and out == want, (name, err)
        assert "template" not in err


@pytest.mark.parametrize("name", ["division", "nested loops"])
def test_chat_falls_back_with_one_warning(name: str, hostile_files, capsys) -> None:
    path = hostile_files[name]
    code, out, err = _generate(capsys, path, "--chat")
    assert code == 0 and out.strip(), err
    warnings = [ln for ln in err.splitlines() if ln.startswith("localllm: warning")]
    assert len(warnings) == 1 and str(path) in warnings[0], err
    assert EXPECT[name] in warnings[0] and "using the built-in 'llama-2' template" in warnings[0]


def test_cli_process_with_hostile_template(hostile_files) -> None:
    path = hostile_files["power"]
    r = subprocess.run(
        [sys.executable, "-m", "localllm.cli", "generate", "--model", str(path)]
        + ["-p", "Once", "-n", "8", "-t", "0", "--chat"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    warning = r.stderr.strip().splitlines()[0]
    assert str(path) in warning and "too large" in warning and "'llama-2'" in warning
