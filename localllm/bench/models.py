"""Benchmark models: a model path, or the name of a synthetic model of ANCHORS.md (real shapes,
random quantized weights; GGUF files, or AWQ folders) written once to the cache folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from localllm.device import cache_root

DEFAULT_MODEL = "llama3-8b-q4_k_m"  # what `localllm bench` measures without --model


def cache_dir() -> Path:
    return cache_root() / "bench"


def resolve_model(name: str) -> str:
    """A path, or the name of a synthetic model (written on first use): a GGUF file, or for
    the AWQ ones (`formats/awq_synthetic.AWQ_SPECS`) a Hugging Face folder."""
    from localllm.formats.awq_synthetic import AWQ_SPECS, write_awq_synthetic
    from localllm.formats.synthetic import SPECS, write_synthetic

    if name in AWQ_SPECS:
        folder = cache_dir() / name
        if not (folder / "config.json").exists():
            print(f"writing synthetic model {name} to {folder} ...", file=sys.stderr)
            write_awq_synthetic(AWQ_SPECS[name], folder)
        return str(folder)
    if name not in SPECS:
        return name
    path = cache_dir() / f"{name}.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"writing synthetic model {name} to {path} ...", file=sys.stderr)
        write_synthetic(SPECS[name], path, vocab_gguf=_spm_vocab())
    return str(path)


def _spm_vocab() -> str | None:
    """The Llama SentencePiece vocab ANCHORS.md asks for, when the test data is around."""
    for base in (
        os.environ.get("LOCALLLM_TESTDATA"),
        Path(__file__).resolve().parents[2] / ".." / "shared" / "testdata",
    ):
        if base and (p := Path(base) / "vocab" / "ggml-vocab-llama-spm.gguf").exists():
            return str(p)
    return None
