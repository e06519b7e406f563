"""spec: n-gram speculative decoding on vs off, batch 1, greedy, on a grounded prompt (the
answer copies text from the prompt, where drafts get accepted) and an open-ended one (where
speculation must not cost much). Needs the engine option --spec-tokens (EngineConfig.spec_tokens);
speculation is switched off per request (SamplingParams.spec_tokens = 0) where the engine has
that, else by a second engine with --spec-tokens 0."""

from __future__ import annotations

import dataclasses
from typing import Any

from localllm.bench.stats import spread
from localllm.bench.suite.base import Context, Skip
from localllm.bench.timing import Trace, greedy, run_sync
from localllm.config import EngineConfig
from localllm.core import SamplingParams

PROMPT_MAX_TOKENS = 384  # prompts are cut to this many tokens (the scenario's context budget)

_PASSAGE = (
    "def moving_average(values, window):\n"
    '    """Mean of each run of `window` consecutive values."""\n'
    "    if window <= 0:\n"
    '        raise ValueError("window must be positive")\n'
    "    total = sum(values[:window])\n"
    "    out = [total / window]\n"
    "    for i in range(window, len(values)):\n"
    "        total += values[i] - values[i - window]\n"
    "        out.append(total / window)\n"
    "    return out\n"
)
PROMPTS = {
    # the answer repeats the passage with one change: most of it can be drafted from the prompt
    "grounded": f"Here is a function:\n\n{_PASSAGE}\nRewrite it with the parameter `window` "
    f"renamed to `size`, changing nothing else:\n\n{_PASSAGE[:40]}",
    "open-ended": "Write a short story about a lighthouse keeper who finds a message in a "
    "bottle. Once upon a time,",
}


def _has(cls: type, name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(cls))


def _measure(ctx: Context, eng: Any, prompt: list[int], params: SamplingParams) -> dict:
    """Warm-up, then reps timed runs: decode rate, drafts tried and accepted, the ids."""
    run_sync(eng, [prompt], params)
    before = (eng.stats.spec_proposed, eng.stats.spec_accepted)
    rates, traces = [], []
    for _ in range(ctx.sizes.reps):
        (t,) = run_sync(eng, [prompt], params)
        rates.append(t.decode_rate)
        traces.append(t)
    drafted = eng.stats.spec_proposed - before[0]
    accepted = eng.stats.spec_accepted - before[1]
    return {"rates": rates, "drafted": drafted, "accepted": accepted, "traces": traces}


def _row(kind: str, k: int, on: dict, off: dict, prompt_len: int) -> dict:
    s_on, s_off = spread(on["rates"]), spread(off["rates"])
    t_on: list[Trace] = on["traces"]
    return {
        "prompt": kind,
        "prompt_tokens": prompt_len,
        "spec_tokens": k,
        "generated_tokens": [t.tokens for t in t_on],
        "tok_s_on": s_on["mean"],
        "tok_s_off": s_off["mean"],
        "speedup": s_on["mean"] / s_off["mean"],
        "drafted": on["drafted"],
        "accepted": on["accepted"],
        "acceptance": on["accepted"] / on["drafted"] if on["drafted"] else None,
        # greedy speculation is lossless: the same tokens with it on and off
        "outputs_match": all(a.ids == b.ids for a, b in zip(t_on, off["traces"])),
    }


def run_spec(ctx: Context) -> list[dict]:
    if not _has(EngineConfig, "spec_tokens"):
        raise Skip(
            "speculative decoding is not in this build (no engine option --spec-tokens / "
            "EngineConfig.spec_tokens)"
        )
    k = ctx.spec_tokens or ctx.sizes.spec_tokens
    per_request = _has(SamplingParams, "spec_tokens")
    eng = ctx.engines.get(spec_tokens=k)
    prompts = {name: eng.encode_prompt(text)[:PROMPT_MAX_TOKENS] for name, text in PROMPTS.items()}
    on, off = {}, {}
    for name, ids in prompts.items():
        # spec_tokens k per request where requests have it (PLAIN turns it off by default)
        on_kw = {"spec_tokens": k} if per_request else {}
        on[name] = _measure(ctx, eng, ids, greedy(ctx.sizes.spec_gen, **on_kw))
        if per_request:
            off[name] = _measure(ctx, eng, ids, greedy(ctx.sizes.spec_gen, spec_tokens=0))
    if not per_request:
        eng = None  # dropped before the engine without speculation is built
        eng = ctx.engines.get(spec_tokens=0)
        for name, ids in prompts.items():
            off[name] = _measure(ctx, eng, ids, greedy(ctx.sizes.spec_gen))
    rows = []
    for name, ids in prompts.items():
        rows.append(_row(name, k, on[name], off[name], len(ids)))
        ctx.progress.advance(f"spec {name}")
    return rows
