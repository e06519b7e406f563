"""Greedy constrained rows take the device path (`GuidedDecoding.apply` -> `ops.masked_argmax`
-> the step's greedy ids) and never reach the host sampler. Their tokens are exactly those of
the host path they replace (mask the logits, then the sampler's argmax): alone, beside
sampled constrained rows and free rows, and under speculative verification with a mask per
draft position. CPU, stories260K (the reference ops; the Triton kernel is checked against
them in test_kernels_masked_argmax.py)."""

from __future__ import annotations

import json

import conftest
import jsonschema
import pytest
import torch
from guided_paths import PETS, both_paths, constrained
from structured_schemas import SCHEMAS

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.engine.guided import GuidedDecoding
from localllm.structured.spec import ConstraintSpec


@pytest.fixture(scope="module")
def engine() -> LLMEngine:
    path = conftest.testdata_path("models", "stories260K.gguf")
    # no prefix cache: the device and the host run see the same batch shapes
    cfg = EngineConfig(model=str(path), device="cpu", spec_tokens=4, spec_max_batch=128,
                       enable_prefix_caching=False)  # fmt: skip
    return LLMEngine(cfg)


def check_json(engine: LLMEngine, ids: list[int], schema: dict) -> None:
    jsonschema.validate(json.loads(engine.tokenizer.decode(ids, continuation=True)), schema)


def test_constrained_greedy_batch_never_calls_the_sampler(engine, monkeypatch) -> None:
    prompt = engine.encode_prompt("Once upon a time")
    schemas = [SCHEMAS[8], SCHEMAS[14], SCHEMAS[17]]
    params = [constrained(s, spec_tokens=0) for s in schemas]
    (dev, dev_seen, _), (host, host_seen, _) = both_paths(engine, [prompt] * 3, params, monkeypatch)
    assert dev == host
    assert dev_seen == set() and host_seen == {0, 1, 2}  # the spy sees the host path
    for ids, schema in zip(dev, schemas):
        check_json(engine, ids, schema)


def test_mixed_batch_keeps_every_row_as_before(engine, monkeypatch) -> None:
    """Constrained greedy rows leave the sampler; constrained sampled rows (seeded: their
    draws are their own) and free rows give the same tokens as before."""
    prompt = engine.encode_prompt("Tom had a cat.")
    free = dict(max_tokens=30, ignore_eos=True, spec_tokens=0)
    params = [
        constrained(SCHEMAS[14], spec_tokens=0),  # 0: constrained greedy
        constrained(SCHEMAS[14], temperature=0.8, seed=3),  # 1: constrained sampled
        SamplingParams(temperature=0.0, **free),  # 2: free greedy
        SamplingParams(temperature=0.9, seed=5, **free),  # 3: free sampled
        constrained(SCHEMAS[17], spec_tokens=0, logprobs=2),  # 4: greedy, wants logprobs
        constrained(SCHEMAS[15], temperature=0.7, seed=9),  # 5: constrained sampled
    ]
    (dev, dev_seen, _), (host, host_seen, _) = both_paths(engine, [prompt] * 6, params, monkeypatch)
    assert dev == host
    assert {1, 3, 4, 5} <= dev_seen and 0 not in dev_seen and 0 in host_seen
    for k, schema in ((0, SCHEMAS[14]), (1, SCHEMAS[14]), (4, SCHEMAS[17]), (5, SCHEMAS[15])):
        check_json(engine, dev[k], schema)


def test_speculative_verify_under_masks_takes_the_device_path(engine, monkeypatch) -> None:
    """Drafts cut by the grammar, one mask per draft position: the greedy acceptance reads the
    masked argmax of every position from the device ids, with the same tokens as before."""
    prompt = engine.encode_prompt('{"pets": ["cat", "dog", "cat", "cat", "dog", "cat"]} ' * 3)
    params = [
        constrained(PETS, spec_tokens=4),  # 0: constrained greedy with drafts
        constrained(PETS, spec_tokens=4),  # 1: the same (another sequence)
        constrained(PETS, temperature=0.8, seed=2),  # 2: constrained sampled
        SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True, spec_tokens=4),  # 3
    ]
    runs = both_paths(engine, [prompt] * 4, params, monkeypatch)
    (dev, dev_seen, dev_kept), (host, host_seen, host_kept) = runs
    assert dev_kept == host_kept > 0  # drafts were verified under the masks (and kept)
    assert dev == host
    assert not {0, 1} & dev_seen and {0, 1} <= host_seen
    for k in (0, 1, 2):
        check_json(engine, dev[k], PETS)


def test_apply_overwrites_the_graph_ids_of_constrained_rows_only(engine) -> None:
    """A CUDA graph's greedy ids (a bucket wider than the step) come in computed on the raw
    logits: apply replaces those of the constrained rows by their masked argmax, in place."""

    guided = GuidedDecoding(engine.tokenizer, engine.model_cfg.vocab_size, engine.runner.model.ops)
    guided.add(7, ConstraintSpec.json_schema({"enum": ["yes", "no"]}))
    logits = torch.randn(3, engine.model_cfg.vocab_size, generator=torch.Generator().manual_seed(0))
    raw = logits.clone()
    graph_ids = torch.full((4,), -1, dtype=torch.int64)  # bucket of 4 for 3 rows
    layout = [(0, 1), (1, 1), (2, 1)]
    got = guided.apply(guided.start_masks([(6, []), (7, []), (8, [])]), logits, layout, graph_ids)
    assert got is graph_ids and graph_ids.tolist()[::2] == [-1, -1]  # free rows untouched
    assert torch.equal(logits[[0, 2]], raw[[0, 2]])
    allowed = torch.isfinite(logits[1])
    assert 0 < int(allowed.sum()) < logits.shape[1]
    masked = raw[1].masked_fill(~allowed, float("-inf"))
    assert graph_ids[1] == masked.argmax() and allowed[graph_ids[1]]
    guided.close()
