"""KV pool sizing: bytes per block, planning from a budget, clear refusals."""

from __future__ import annotations

import pytest
import torch

from localllm.config import EngineConfig, ModelConfig
from localllm.core import SamplingParams
from localllm.engine.kv_cache import (
    allocate_kv_cache,
    bytes_per_block,
    plan_num_blocks,
    resolve_kv_dtype,
)
from localllm.errors import OutOfMemoryError

CFG = ModelConfig(
    arch="llama",
    vocab_size=128256,
    dim=4096,
    n_layers=32,
    n_heads=32,
    n_kv_heads=8,
    head_dim=128,
    ffn_dim=14336,
    context_length=8192,
)


def test_bytes_per_block():
    # K and V, 8 heads x 16 tokens x 128 dims, 32 layers
    assert bytes_per_block(CFG, 16, "fp16") == 2 * 8 * 16 * 128 * 2 * 32
    assert bytes_per_block(CFG, 16, "int8") == (2 * 8 * 16 * 128 + 2 * 8 * 16 * 4) * 32
    assert bytes_per_block(CFG, 16, "fp8") == bytes_per_block(CFG, 16, "int8")


def test_plan_refuses_with_largest_context():
    per = bytes_per_block(CFG, 16, "fp16")
    assert plan_num_blocks(CFG, 16, "fp16", per * 1000, 8192) == 1000
    with pytest.raises(OutOfMemoryError) as e:
        plan_num_blocks(CFG, 16, "fp16", per * 100, 8192)
    msg = str(e.value)
    assert "8192-token context" in msg and "largest context that fits is 1600 tokens" in msg
    assert "--kv-dtype int8" in msg
    with pytest.raises(OutOfMemoryError, match="no GPU memory is left"):
        plan_num_blocks(CFG, 16, "fp16", -5, 8192)


def test_allocate_layout():
    small = ModelConfig(
        arch="llama",
        vocab_size=10,
        dim=16,
        n_layers=2,
        n_heads=2,
        n_kv_heads=1,
        head_dim=8,
        ffn_dim=32,
        context_length=64,
    )
    kv = allocate_kv_cache(small, 5, 16, "int8", torch.device("cpu"))
    assert kv.k[1].shape == (5, 1, 16, 8) and kv.k[1].dtype == torch.int8
    assert kv.k_scale[0].shape == (5, 1, 16)
    kv = allocate_kv_cache(small, 5, 16, "fp32", torch.device("cpu"))
    assert kv.k_scale[0] is None


def test_kv_dtype_auto_and_validation():
    assert resolve_kv_dtype("auto", torch.device("cpu")) == "fp32"
    assert resolve_kv_dtype("int8", torch.device("cpu")) == "int8"
    with pytest.raises(ValueError):
        EngineConfig(model="x", kv_dtype="fp4")


def test_default_context_shrinks_to_the_pool_but_an_explicit_one_is_refused(testdata):
    from localllm.engine.engine import LLMEngine

    path = str(testdata / "models" / "stories260K.gguf")
    # stories260K: 5 layers x 4 KV heads x 8 dims; a pool of 32 blocks holds 512 tokens
    import localllm.engine.kv_cache as pool

    per = bytes_per_block(
        ModelConfig(
            arch="llama",
            vocab_size=512,
            dim=64,
            n_layers=5,
            n_heads=8,
            n_kv_heads=4,
            head_dim=8,
            ffn_dim=172,
            context_length=2048,
        ),
        16,
        "fp32",
    )
    old = pool.CPU_KV_BUDGET
    pool.CPU_KV_BUDGET = per * 160  # 2560 tokens: less than 2 full 2048-token contexts
    try:
        eng = LLMEngine(EngineConfig(model=path, device="cpu", max_num_seqs=1))
        assert eng.max_model_len == 2048  # one full context fits
        pool.CPU_KV_BUDGET = per * 64  # 1024 tokens: not even one context
        with pytest.raises(OutOfMemoryError, match="largest context that fits is 1024"):
            LLMEngine(EngineConfig(model=path, device="cpu", max_model_len=2048))
    finally:
        pool.CPU_KV_BUDGET = old


def test_long_default_context_shrinks_to_fit(tmp_path):
    from gguf import GGMLQuantizationType as Q

    import localllm.engine.kv_cache as pool
    from localllm.engine.engine import LLMEngine
    from localllm.formats.synthetic import SyntheticSpec, UniformRule, write_synthetic

    spec = SyntheticSpec(
        name="long",
        vocab=300,
        dim=64,
        n_layers=1,
        n_heads=4,
        n_kv_heads=2,
        ffn=128,
        tensor_type=UniformRule(Q.F32),
        context_length=65536,
    )
    path = str(write_synthetic(spec, tmp_path / "long.gguf"))
    mc = ModelConfig(
        arch="llama",
        vocab_size=300,
        dim=64,
        n_layers=1,
        n_heads=4,
        n_kv_heads=2,
        head_dim=16,
        ffn_dim=128,
        context_length=65536,
    )
    old = pool.CPU_KV_BUDGET
    pool.CPU_KV_BUDGET = bytes_per_block(mc, 16, "fp32") * 256  # 4096 tokens
    try:
        eng = LLMEngine(EngineConfig(model=path, device="cpu", max_num_seqs=1, block_size=16))
        assert eng.max_model_len == 4096 and eng.runner.kv.num_blocks == 256
        [out] = eng.generate([[1, 2, 3]], SamplingParams(max_tokens=4, temperature=0))
        assert len(out) == 4
    finally:
        pool.CPU_KV_BUDGET = old
