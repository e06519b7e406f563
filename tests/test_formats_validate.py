"""Structurally invalid model files are refused before use, with one line naming the problem.

Each case is a copy of stories260K damaged the way the issue's mutation run found accepted
or crashing: the CLI (in process, and a few through a subprocess) exits 2 with one line on
stderr naming the file, and the library API raises ModelLoadError.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from gguf_edit import Q, V, duplicate_key, patch_tensor_info, rewrite, tensor_data_offset

from localllm.cli import main
from localllm.config import EngineConfig
from localllm.errors import ModelLoadError
from localllm.formats.gguf import GGUFFile
from localllm.formats.gguf_config import model_config_from_gguf

U32, F32 = V.UINT32, V.FLOAT32


def _kv(**items: tuple) -> Callable[[Path, Path], Path]:
    return lambda src, dst: rewrite(
        src, dst, kv={k.replace("__", "."): v for k, v in items.items()}
    )


def _vector(name: str, n: int) -> Callable[[Path, Path], Path]:
    def edit(t: str, data: np.ndarray, qtype: Q) -> tuple[np.ndarray, Q]:
        return (np.ones(n, np.float32), Q.F32) if t == name else (data, qtype)

    return lambda src, dst: rewrite(src, dst, tensors=edit)


def _retype(name: str, qtype: Q) -> Callable[[Path, Path], Path]:
    return lambda src, dst: patch_tensor_info(src, dst, name, qtype=int(qtype))


def _onto_previous(name: str, prev: str) -> Callable[[Path, Path], Path]:
    return lambda src, dst: patch_tensor_info(src, dst, name, offset=tensor_data_offset(src, prev))


def _drop(name: str) -> Callable[[Path, Path], Path]:
    return lambda src, dst: rewrite(src, dst, tensors=lambda t, d, q: None if t == name else (d, q))


def _token_types(value: int) -> Callable[[Path, Path], Path]:
    types = [1] * 512
    types[300] = value
    return _kv(tokenizer__ggml__token_type=(types, V.ARRAY, V.INT32))


CASES: dict[str, tuple[Callable[[Path, Path], Path], str]] = {
    "head_count 0": (_kv(llama__attention__head_count=(0, U32, None)), "head_count' is 0"),
    "head_count_kv 0": (_kv(llama__attention__head_count_kv=(0, U32, None)), "head_count_kv"),
    "block_count 0": (_kv(llama__block_count=(0, U32, None)), "block_count' is 0"),
    "context_length 0": (_kv(llama__context_length=(0, U32, None)), "context_length' is 0"),
    "head_count float": (
        _kv(llama__attention__head_count=(8.0, F32, None)),
        "has type FLOAT32, expected int",
    ),
    "block_count float": (_kv(llama__block_count=(5.0, F32, None)), "has type FLOAT32"),
    "eps nan": (_kv(llama__attention__layer_norm_rms_epsilon=(math.nan, F32, None)), "nan"),
    "eps inf": (_kv(llama__attention__layer_norm_rms_epsilon=(math.inf, F32, None)), "inf"),
    "eps -1": (_kv(llama__attention__layer_norm_rms_epsilon=(-1.0, F32, None)), "must be > 0"),
    "block_count 4": (_kv(llama__block_count=(4, U32, None)), "belongs to no block"),
    "block_count 6": (_kv(llama__block_count=(6, U32, None)), "missing tensor 'blk.5."),
    "norm 0": (_vector("output_norm.weight", 0), "has shape (0,), expected (64,)"),
    "norm 63": (_vector("output_norm.weight", 63), "shape (63,)"),
    "norm 65": (_vector("output_norm.weight", 65), "shape (65,)"),
    "norm 128": (_vector("output_norm.weight", 128), "shape (128,)"),
    "norm 1": (_vector("blk.2.ffn_norm.weight", 1), "'blk.2.ffn_norm.weight' has shape (1,)"),
    "F16": (_retype("blk.1.attn_q.weight", Q.F16), "does not match"),
    "Q8_0": (_retype("output_norm.weight", Q.Q8_0), "does not match"),
    "Q4_0": (_retype("blk.4.attn_output.weight", Q.Q4_0), "does not match"),
    "Q4_0 rows": (_retype("blk.4.ffn_down.weight", Q.Q4_0), "not a multiple of the Q4_0 block"),
    "BF16 last": (_retype("blk.4.ffn_norm.weight", Q.BF16), "follow the last tensor"),
    "overlap": (_onto_previous("blk.0.attn_k.weight", "blk.0.attn_q.weight"), "overlaps"),
    "duplicate key": (
        lambda s, d: duplicate_key(s, d, "llama.embedding_length"),
        "duplicate metadata key 'llama.embedding_length'",
    ),
    "token type 7": (_token_types(7), "token_type' is 7"),
    "token type -1": (_token_types(-1), "token_type' is -1"),
    "bos id": (_kv(tokenizer__ggml__bos_token_id=(512, U32, None)), "bos_token_id is 512"),
    "eos id": (_kv(tokenizer__ggml__eos_token_id=(9999, U32, None)), "eos_token_id is 9999"),
    "unk id": (_kv(tokenizer__ggml__unknown_token_id=(600, U32, None)), "outside the vocab"),
    "missing tensor": (_drop("blk.3.ffn_up.weight"), "missing tensor 'blk.3.ffn_up.weight'"),
    "unknown tensor": (
        lambda s, d: rewrite(s, d, extra_tensors={"blk.0.attn_sinks": (np.ones(8, "f4"), Q.F32)}),
        "unexpected tensor 'blk.0.attn_sinks'",
    ),
    "vocab mismatch": (
        _kv(tokenizer__ggml__tokens=([f"t{i}" for i in range(500)], V.ARRAY, V.STRING)),
        "token_type has 512 entries for 500 tokens",
    ),
}


@pytest.fixture(scope="module")
def mutants(tmp_path_factory, stories_path_module: Path) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("mutants")
    return {
        name: make(stories_path_module, d / f"{name.replace(' ', '_')}.gguf")
        for name, (make, _) in CASES.items()
    }


@pytest.fixture(scope="module")
def stories_path_module() -> Path:
    from conftest import testdata_path

    return testdata_path("models", "stories260K.gguf")


def cli_error(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    code = main(["generate", "--model", str(path), "--prompt", "x", "-n", "1", "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and str(path) in err, err
    return err


@pytest.mark.parametrize("case", list(CASES))
def test_invalid_file_is_refused(case: str, mutants: dict[str, Path], capsys) -> None:
    path, needle = mutants[case], CASES[case][1]
    assert needle in cli_error(capsys, path)
    with pytest.raises(ModelLoadError) as e:
        model_config_from_gguf(GGUFFile(path))
    assert e.value.path == str(path) and needle in e.value.reason


@pytest.mark.parametrize("case", ["F16", "bos id"])
def test_invalid_file_refused_by_the_cli_process(case: str, mutants: dict[str, Path]) -> None:
    path = mutants[case]
    r = subprocess.run(
        [sys.executable, "-m", "localllm.cli", "generate", "--model", str(path), "-p", "x"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and CASES[case][1] in lines[0], r.stderr


def test_library_api_refuses(mutants: dict[str, Path]) -> None:
    from localllm.engine.engine import LLMEngine

    with pytest.raises(ModelLoadError, match="overlaps"):
        LLMEngine(EngineConfig(model=str(mutants["overlap"]), device="cpu"))


def test_real_files_pass(testdata: Path) -> None:
    for rel in ("models/stories260K.gguf", "models/pycode-22m-q4_k_m.gguf"):
        cfg = model_config_from_gguf(GGUFFile(testdata / rel))
        assert cfg.n_layers > 0
    for vocab in (testdata / "vocab").glob("*.gguf"):
        assert GGUFFile(vocab).metadata["tokenizer.ggml.tokens"]
