"""Replay the speculative policy on recorded greedy outputs: how many tokens per unit of step
cost a draft-length rule and a verify price would give, without a GPU.

Greedy speculation is lossless, so each prompt's output is the same whatever is drafted: this
records it once (CPU, speculation off), then walks it as the engine would: the real Speculator
proposes drafts for the text so far, the accepted run is the drafts' longest prefix that the
recorded output continues with, and the step costs `verify_cost(k)` plain steps under the
*true* price given here (measured on a GPU: `--true FIXED,PER_DRAFT`), while the policy drafts
by the price it is told (`--prices`). Speedup = tokens / cost, per prompt kind.

Usage: python3 scripts/spec_policy_sim.py --model PATH [--which code] [--gen 128] [--k 8]
           --true 1.4,0.09 --prices 0.036,0.136 1.4,0.09
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from localllm.bench.spec import prompt_set
from localllm.config import EngineConfig
from localllm.core import SamplingParams, SequenceState
from localllm.engine.engine import LLMEngine
from localllm.engine.speculative.policy import SpecPolicy, verify_cost
from localllm.engine.speculative.speculator import Speculator


def record(model: str, which: str, gen: int, cache: Path) -> list[tuple[str, list[int], list[int]]]:
    """(kind, prompt ids, greedy output ids) per prompt, computed once and cached."""
    if cache.exists():
        return [tuple(x) for x in json.loads(cache.read_text())]  # type: ignore[misc]
    eng = LLMEngine(EngineConfig(model=model, device="cpu", spec_tokens=0, max_model_len=4096))
    prompts = prompt_set(eng, which)
    sp = SamplingParams(max_tokens=gen, temperature=0.0)
    out = [(kind, ids, eng.generate([ids], sp)[0]) for kind, ids in prompts]
    eng.close()
    cache.write_text(json.dumps(out))
    return out


def replay(prompt: list[int], out: list[int], k: int, told: tuple[float, float],
           true: tuple[float, float]) -> tuple[int, float, int, int]:  # fmt: skip
    """(tokens, cost in plain steps, drafted, accepted) of one greedy generation."""
    spec = Speculator(SpecPolicy(k, cost_fixed=told[0], cost_per_draft=told[1]), 1 << 20)
    seq = SequenceState("r", list(prompt), SamplingParams(max_tokens=len(out), temperature=0.0))
    pos, cost, drafted, accepted = 0, 0.0, 0, 0
    while pos < len(out):
        spec.propose([seq])
        d = seq.draft_ids[: len(out) - pos - 1]
        a = 0
        while a < len(d) and d[a] == out[pos + a]:
            a += 1
        if d:
            spec.observe(seq, len(d), a)
        cost += verify_cost(len(d), true[1], true[0]) if d else 1.0
        drafted, accepted = drafted + len(d), accepted + a
        seq.token_ids += out[pos : pos + a + 1]
        pos += a + 1
    return len(out), cost, drafted, accepted


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--which", default="auto")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--true", required=True, help="FIXED,PER_DRAFT measured verify price")
    ap.add_argument("--prices", nargs="+", required=True, help="FIXED,PER_DRAFT prices told")
    ap.add_argument("--cache", default=None, help="JSON of the recorded outputs")
    a = ap.parse_args()
    cache = Path(a.cache or f"/tmp/spec_sim_{Path(a.model).stem}_{a.which}_{a.gen}.json")
    runs = record(a.model, a.which, a.gen, cache)
    true = tuple(float(x) for x in a.true.split(","))
    for price in a.prices:
        told = tuple(float(x) for x in price.split(","))
        agg: dict[str, list[float]] = {}
        for kind, prompt, out in runs:
            r = replay(prompt, out, a.k, told, true)  # type: ignore[arg-type]
            s = agg.setdefault(kind, [0, 0.0, 0, 0])
            for i, v in enumerate(r):
                s[i] += v
        for kind, (tok, cost, dr, ac) in agg.items():
            print(f"told {price:>12} {kind:<9} speedup {tok / cost:.3f}x, acceptance "
                  f"{ac / max(dr, 1):.2f} of {dr:.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
