"""Per-kernel time breakdown of decode steps (what a step spends in GEMV, attention, the rest,
and how much of the wall time no kernel runs: launch gaps and host work)."""

from __future__ import annotations

import time

from localllm.bench.timing import greedy

# kernel-name fragments -> category, first match wins
CATEGORIES = (
    ("qlinear", "weights (GEMV/GEMM)"),
    ("qmm", "weights (GEMV/GEMM)"),
    ("dp4a", "weights (GEMV/GEMM)"),
    ("quant_act", "activation quantization"),
    ("dequant", "weights (GEMV/GEMM)"),
    ("gemm", "weights (GEMV/GEMM)"),
    ("gemv", "weights (GEMV/GEMM)"),
    ("cutlass", "weights (GEMV/GEMM)"),
    ("nvjet", "weights (GEMV/GEMM)"),  # cuBLAS's GEMMs on Hopper
    ("attn", "attention"),
    ("merge", "attention"),
    ("rope", "rope + KV store"),
    ("rms_norm", "norms"),
    ("silu", "silu*mul"),
)


def categorize(name: str) -> str:
    low = name.lower()
    return next(
        (cat for frag, cat in CATEGORIES if frag in low), "other (sampling, embedding, copies)"
    )


PROFILE_STEPS = 20  # profiled decode steps
WARM_STEPS = 10  # untimed steps first: prefill done, decode graphs warm
PROMPT_TOKENS = 2  # BOS and one token per sequence
SPARE_TOKENS = 8  # generated past the profiled steps, so no sequence ends inside them
# the context a profiled sequence needs (bench sizes its engine for it: cli/bench.py)
PROFILE_CONTEXT = PROMPT_TOKENS + WARM_STEPS + PROFILE_STEPS + SPARE_TOKENS


def depth_prompt(bos: int, seq: int, depth: int, vocab: int) -> list[int]:
    """A profiled sequence's prompt: BOS and `depth` + 1 more tokens (`depth` tokens of context
    ahead of the profiled steps beside the PROMPT_TOKENS of a depth-0 profile), different per
    sequence `seq` (no prefix shared between sequences)."""
    span = max(vocab - 200, 1)
    return [bos] + [100 + (seq * 7919 + j) % span for j in range(depth + 1)]


def warm_up(engine, ids: list[str]) -> None:
    """Step until every sequence of `ids` has its prompt prefilled (a deep context takes several
    chunked steps), then WARM_STEPS decode steps: the profiled steps are all decode steps."""
    bound = sum(engine.requests[r].seq.num_tokens for r in ids)  # >= 1 token per step
    for _ in range(bound):
        if not any(r in engine.requests and engine.requests[r].seq.in_prefill for r in ids):
            break
        engine.step()
    for _ in range(WARM_STEPS):
        engine.step()


def profile_decode(engine, batch: int, steps: int = PROFILE_STEPS, depth: int = 0) -> dict:
    """Put `batch` sequences into decode after `depth` tokens of context each, then profile
    `steps` engine steps."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    bos = engine.tokenizer.bos_id or 1
    gen = min(WARM_STEPS + steps + SPARE_TOKENS, engine.max_model_len - PROMPT_TOKENS - depth)
    params = greedy(gen)  # plain steps: drafts of a looping output would end it early
    vocab = engine.tokenizer.vocab_size
    ids = [engine.add_request(depth_prompt(bos, i, depth, vocab), params) for i in range(batch)]
    warm_up(engine, ids)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            engine.step()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    for rid in ids:
        engine.abort(rid)
    return {"batch": batch, "depth": depth, "pdl": engine.runner.launches_pdl,
            **kernel_breakdown(prof, steps, wall)}  # fmt: skip


def kernel_breakdown(prof, steps: int, wall: float, top: int = 12) -> dict:
    """A torch profiler's CUDA kernels over `steps` repetitions of one unit of work (a decode
    step, a prefill) that took `wall` seconds in all: ms per unit, the fraction of the wall
    time per category (and idle), the `top` kernels (name, us and calls per unit)."""
    per_cat: dict[str, float] = {}
    kernels: list[tuple[str, float, float]] = []  # (name, us per step, calls per step)
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if t and ev.key and not ev.key.startswith("ProfilerStep"):
            cat = categorize(ev.key)
            per_cat[cat] = per_cat.get(cat, 0.0) + t / 1e6
            kernels.append((ev.key[:60], t / steps, ev.count / steps))
    busy = sum(per_cat.values())
    fractions = {k: v / wall for k, v in sorted(per_cat.items(), key=lambda kv: -kv[1])}
    fractions["idle (launch gaps, host)"] = max(0.0, 1 - busy / wall)
    kernels.sort(key=lambda k: -k[1])
    return {"step_ms": 1000 * wall / steps, "fractions": fractions, "kernels": kernels[:top],
            "kernel_us": 1e6 * busy / steps}  # fmt: skip


def format_profile(p: dict, title: str | None = None) -> str:
    """`title` names the unit (default: a decode step at the profile's batch)."""
    depth = f", {p['depth']:,} tokens of context" if p.get("depth") else ""
    title = title or f"decode step at batch {p['batch']}{depth}"
    rows = [f"{title}: {p['step_ms']:.2f} ms"]
    if p.get("pdl"):  # kernel spans overlap: shares of the wall would add up past 100%
        rows.append(
            "  programmatic dependent launch: each kernel's time includes its wait for the one "
            "before, so they overlap; LOCALLLM_PDL=0 gives a per-kernel breakdown"
        )
    else:
        rows += [f"  {k:38s} {100 * v:5.1f}%" for k, v in p["fractions"].items()]
    if p.get("kernels"):
        rows.append(f"  kernels: {p['kernel_us']:.0f} us per step (profiler on); top by time:")
        rows += [
            f"    {us:7.1f} us  {calls:5.0f} calls  {name}" for name, us, calls in p["kernels"]
        ]
    return "\n".join(rows)
