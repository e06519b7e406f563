"""Engine options come from EngineConfig's fields: one default, one choice list, in --help."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from localllm.cli import build_parser, main
from localllm.cli.args import engine_config
from localllm.config import EngineConfig


def _flag_fields() -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(EngineConfig) if f.metadata.get("flag")]


@pytest.mark.parametrize("cmd", ["generate", "serve", "chat", "bench"])
def test_every_option_shows_its_default(cmd, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([cmd, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for f in _flag_fields():
        assert f.metadata["flag"] in text
    for flag in ("--block-size", "--kv-dtype", "--max-num-seqs", "--no-prefix-caching"):
        after = text.split(flag, 2)[-1]
        assert "(default:" in after.split(" --")[0], flag
    assert "--speculative-tokens" not in text


def test_defaults_are_the_dataclass_defaults_and_flags_reach_the_config(tmp_path):
    model = tmp_path / "x.gguf"  # engine_config resolves --model: an existing path stays as is
    model.write_bytes(b"GGUF")
    args = build_parser().parse_args(["generate", "-m", str(model), "-p", ""])
    cfg = engine_config(args)
    assert cfg == EngineConfig(model=str(model))
    args = build_parser().parse_args(
        ["generate", "-m", str(model), "-p", "", "--block-size", "32", "--no-prefix-caching"]
        + ["--fp16-gemv", "--no-cuda-graphs", "--kv-dtype", "int8", "--decode-prefill-chunk", "0"]
        + ["--step-overlap", "off"]
    )
    cfg = engine_config(args, max_num_seqs=1)
    assert cfg.step_overlap == "off" and not cfg.step_overlap_on(graphs=True)
    assert (cfg.block_size, cfg.enable_prefix_caching, cfg.int8_activations) == (32, False, False)
    assert (cfg.cuda_graphs, cfg.kv_dtype, cfg.decode_prefill_chunk) == (False, "int8", 0)
    assert cfg.max_num_seqs == 1


def test_bad_values_are_one_line_errors(capsys):
    assert main(["generate", "-m", "x.gguf", "-p", "", "--gpu-memory-utilization", "1.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["localllm: error: --gpu-memory-utilization must be in [0.05, 0.99]"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate", "-m", "x", "-p", "", "--block-size", "24"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate", "-m", "x", "-p", "", "--speculative-tokens", "4"])


def _generate_golden(testdata, capsys, *flags: str) -> tuple[str, str]:
    """(the text of `localllm generate` on stories260K with flags, greedy, 40 tokens; its
    golden text)."""
    gold = json.loads((testdata / "golden" / "stories260K_greedy.json").read_text())
    model = str(testdata / "models" / "stories260K.gguf")
    assert main(["generate", "-m", model, "-p", "", "-n", "40", "-t", "0", *flags]) == 0
    out = capsys.readouterr().out.strip()
    expected = re.sub(r"<0x([0-9A-F]{2})>", lambda m: chr(int(m.group(1), 16)), gold["text"])
    return out, expected


def test_block_size_changes_the_pool_not_the_text(testdata, capsys):
    out, expected = _generate_golden(testdata, capsys, "--block-size", "8")
    assert out and expected.strip().startswith(out)


def test_step_overlap_from_the_command_line(testdata, capsys):
    """`--step-overlap on` forces overlapped steps on the CPU path: the same greedy text."""
    out, expected = _generate_golden(testdata, capsys, "--step-overlap", "on")
    assert out and expected.strip().startswith(out)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate", "-m", "x", "-p", "", "--step-overlap", "yes"])


def _subparsers(parser):
    import argparse

    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


@pytest.mark.parametrize("cmd", [None, "generate", "serve", "chat", "bench"])
def test_help_states_every_options_default(cmd):
    """Every option (engine or not) of every command says its default in --help."""
    import argparse

    parser = build_parser()
    p = parser if cmd is None else _subparsers(parser)[cmd]
    fmt = p._get_formatter()
    missing = []
    for a in p._actions:
        if not a.option_strings or a.required:
            continue
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            continue
        text = " ".join(fmt._expand_help(a).split()) if a.help else ""
        if "default:" not in text:
            missing.append(a.option_strings[0])
        assert "".join(text.split()) in "".join(p.format_help().split())  # what --help prints
    assert missing == []
