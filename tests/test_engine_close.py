"""LLMEngine.close(): an engine frees what it holds, so a second engine in the same process
(a bench sweep, a model switch in the chat) can size its KV pool from that memory."""

from __future__ import annotations

import gc

import pytest
import torch
from conftest import testdata_path

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.errors import RequestError


def _cfg(path: str, **kw: object) -> EngineConfig:
    return EngineConfig(model=path, **kw)  # type: ignore[arg-type]


def _greedy(engine: LLMEngine, n: int = 8) -> list[int]:
    ids = engine.encode_prompt("Once upon a time")
    return engine.generate([ids], SamplingParams(temperature=0, max_tokens=n))[0]


def test_close_frees_the_runner_and_refuses_new_requests() -> None:
    path = str(testdata_path("models", "stories260K.gguf"))
    with LLMEngine(_cfg(path, device="cpu")) as engine:
        first = _greedy(engine)
        engine.add_request(engine.encode_prompt("Lily"), SamplingParams(max_tokens=4))
    assert engine.closed and not engine.requests
    assert not hasattr(engine.runner, "kv") and not hasattr(engine.runner, "model")
    with pytest.raises(RequestError, match="closed"):
        engine.add_request([1, 2], SamplingParams())
    assert engine.step() == []
    engine.close()  # twice is harmless
    with LLMEngine(_cfg(path, device="cpu")) as again:
        assert _greedy(again) == first


def _cuda_engine(path: str) -> LLMEngine:
    return LLMEngine(_cfg(path, device="cuda", gpu_memory_utilization=0.9, max_num_seqs=8))


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["close", "del"])
def test_second_gpu_engine_gets_the_memory_back(how: str) -> None:
    """The first engine's pool takes ~90% of the GPU; the second only fits if it is freed."""
    path = str(testdata_path("models", "pycode-22m-q4_k_m.gguf"))
    engine = _cuda_engine(path)
    blocks, first = engine.block_manager.num_blocks, _greedy(engine)
    if how == "close":
        engine.close()
        free, total = torch.cuda.mem_get_info()
        assert free > 0.5 * total, (
            f"close() left {free / 2**30:.1f} GiB of {total / 2**30:.1f} free"
        )
    del engine
    gc.collect()
    second = _cuda_engine(path)
    try:
        assert second.block_manager.num_blocks >= 0.9 * blocks
        assert _greedy(second) == first
    finally:
        second.close()
