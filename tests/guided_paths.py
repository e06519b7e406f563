"""Helpers for the tests of guided decoding's device path (CPU and GPU): run a batch on the
device path and on the host path it replaced, and spy on which rows reach the sampler. No
jsonschema here: the GPU machine does not have it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.structured.spec import ConstraintSpec

PETS = {
    "type": "object",
    "properties": {"pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 9}},
    "required": ["pets"],
    "additionalProperties": False,
}


def host_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule before the device path: only unconstrained greedy rows took device ids."""
    old = lambda p: p.greedy and not p.needs_penalties and p.logprobs is None and not p.constraint
    monkeypatch.setattr(SamplingParams, "argmax_on_device", property(old))


def spy_sampler(engine: LLMEngine, monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The seq ids of every row the host sampler sees (sampling, verify probs, draws)."""
    seen: set[int] = set()
    for name in ("sample", "probs", "sample_from_probs", "uniform"):
        real: Callable[..., Any] = getattr(engine.sampler, name)

        def wrapper(*args: Any, _real: Callable[..., Any] = real) -> Any:
            seen.update(r.seq_id for r in args[-1])  # the SamplingRows come last
            return _real(*args)

        monkeypatch.setattr(engine.sampler, name, wrapper)
    return seen


def run(engine: LLMEngine, prompts: list[list[int]], params: list[SamplingParams]):
    """(generated ids per request, their seq ids)."""
    rids = [engine.add_request(p, sp) for p, sp in zip(prompts, params)]
    seq_ids = [engine.requests[r].seq.seq_id for r in rids]
    out: dict[str, list[int]] = {r: [] for r in rids}
    while engine.has_work():
        for ev in engine.step():
            out[ev.request_id] += ev.token_ids
    return [out[r] for r in rids], seq_ids


def both_paths(engine, prompts, params, monkeypatch):
    """Run on the device path, then on the host path: (outputs, indices of the requests whose
    rows the sampler saw, drafts accepted) of each."""
    res = []
    for host in (False, True):
        with monkeypatch.context() as m:
            if host:
                host_path(m)
            seen = spy_sampler(engine, m)
            accepted = engine.stats.spec_accepted
            outs, seq_ids = run(engine, prompts, params)
        seen_k = {seq_ids.index(s) for s in seen if s in seq_ids}
        res.append((outs, seen_k, engine.stats.spec_accepted - accepted))
    return res


def constrained(schema: dict, temperature: float = 0.0, **kw: Any) -> SamplingParams:
    spec = ConstraintSpec.json_schema(schema)
    return SamplingParams(max_tokens=120, temperature=temperature, constraint=spec, **kw)
