"""spec: n-gram speculative decoding on vs off at batch 1, per kind of prompt (input-grounded,
where drafts get accepted, and open-ended, where speculation must not cost much), through the
comparison of bench/spec.py (prompt sets in bench/spec_prompts.py)."""

from __future__ import annotations

from localllm.bench.suite.base import Context

PROMPT_BUDGET = 1024  # context the scenario reserves for its longest prompt (then + --spec-gen)
KINDS = 2  # grounded, open: one progress step each


def run_spec(ctx: Context) -> list[dict]:
    from localllm.bench.spec import BENCH_SPEC_TOKENS, compare, prompt_set

    eng = ctx.engines.get(spec_tokens=ctx.spec_k)
    k = ctx.spec_k or eng.spec_tokens or BENCH_SPEC_TOKENS
    prompts = prompt_set(eng, ctx.spec_prompts)
    reps = ctx.sizes.reps  # each prompt's off and on runs: the fastest of reps
    by_kind = compare(eng, prompts, ctx.sizes.spec_gen, k, reps)
    rows = []
    for kind, r in by_kind.items():
        rows.append({"prompt": kind, "prompt_set": ctx.spec_prompts, "spec_tokens": k,
                     "gen": ctx.sizes.spec_gen, "reps": reps, **r})  # fmt: skip
        ctx.progress.advance(f"spec {kind}")
    return rows
