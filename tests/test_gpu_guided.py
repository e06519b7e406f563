"""Guided decoding on an NVIDIA GPU: masks applied to device logits (CUDA graphs on and off),
constrained and free sequences in one batch, answers that parse, free ones unchanged.
Needs the llguidance wheel carried in .whl/ (scripts/device_setup.sh installs it)."""

from __future__ import annotations

import gc
import json

import conftest
import pytest
import torch
from guided_paths import PETS, both_paths, constrained
from structured_schemas import SCHEMAS

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.structured.spec import ConstraintSpec

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("graphs", [True, False])
def test_schema_suite_on_gpu(graphs: bool) -> None:
    path = conftest.testdata_path("models", "stories260K.gguf")
    cfg = EngineConfig(model=str(path), device="cuda", gpu_memory_utilization=0.3,
                       max_model_len=1024, max_num_seqs=64, cuda_graphs=graphs)  # fmt: skip
    eng = LLMEngine(cfg)
    prompt = eng.encode_prompt("Once upon a time")
    free = SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)
    alone = eng.generate([prompt], free)[0]
    params = [
        SamplingParams(
            max_tokens=200,
            temperature=0.0 if k % 2 else 0.8,
            seed=k,
            constraint=ConstraintSpec.json_schema(s),
        )  # fmt: skip
        for k, s in enumerate(SCHEMAS)
    ]
    outs = eng.generate([prompt] * (len(SCHEMAS) + 1), [free, *params])
    assert outs[0] == alone
    for schema, ids in zip(SCHEMAS, outs[1:]):  # (validated on CPU: no jsonschema there)
        value = json.loads(eng.tokenizer.decode(ids, continuation=True))
        assert schema.get("type") != "object" or isinstance(value, dict)
    assert eng.guided.masked_rows > 0
    print(f"llguidance CPU time per masked token: {eng.guided.cpu_us_per_token:.1f} us")
    del eng
    gc.collect()
    torch.cuda.empty_cache()


def test_greedy_constrained_rows_take_the_device_path_in_graphs(monkeypatch) -> None:
    """With CUDA graphs, greedy constrained rows (speculation on: masks per draft position)
    read the masked argmax from the graph's greedy ids, never reach the sampler, and give the
    tokens of the host path (mask, then the sampler's argmax)."""
    path = conftest.testdata_path("models", "stories260K.gguf")
    # no prefix cache: the device and the host run see the same batch shapes
    cfg = EngineConfig(model=str(path), device="cuda", gpu_memory_utilization=0.3,
                       max_model_len=1024, max_num_seqs=16, spec_tokens=4,
                       enable_prefix_caching=False)  # fmt: skip
    eng = LLMEngine(cfg)
    prompt = eng.encode_prompt('{"pets": ["cat", "dog", "cat", "cat", "dog", "cat"]} ' * 3)
    params = [constrained(s, spec_tokens=0) for s in SCHEMAS[8:20]]
    params += [constrained(PETS, spec_tokens=4), constrained(PETS, temperature=0.8, seed=2)]
    (dev, seen, _), (host, host_seen, _) = both_paths(eng, [prompt] * 14, params, monkeypatch)
    assert dev == host
    assert seen == {13} and set(range(13)) <= host_seen
    assert eng.runner.graphs is not None and eng.runner.graphs.replays["decode"] > 0
    del eng
    gc.collect()
    torch.cuda.empty_cache()
