"""`localllm bench` measurements: llama-bench-style pp/tg, batched decode, prefix-cache TTFT,
inter-token latency under a long prefill, and the copy bandwidth that bounds decode."""

from __future__ import annotations

import random
import time

from localllm.core import SamplingParams


def measure_bandwidth() -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write), the decode ceiling's base."""
    import torch

    if not torch.cuda.is_available():
        return 0.0
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    reps = 20
    for _ in range(reps):
        b.copy_(a)
    torch.cuda.synchronize()
    return 2 * n * reps / (time.perf_counter() - t0)


def _run(engine, prompts: list[list[int]], gen: int) -> tuple[float, float, int]:
    """Returns (seconds to first token of the last request, total seconds, generated tokens)."""
    # plain decoding, as llama-bench measures it (random-weight models loop, so n-gram drafts
    # would inflate tg); `--spec` measures speculation on real prompts
    params = SamplingParams(max_tokens=gen, temperature=0.0, ignore_eos=True, spec_tokens=0)
    ids = [engine.add_request(p, params) for p in prompts]
    remaining = set(ids)
    t0 = time.perf_counter()
    first = {}
    n = 0
    while remaining:
        for ev in engine.step():
            if ev.token_ids and ev.request_id not in first:
                first[ev.request_id] = time.perf_counter()
            n += len(ev.token_ids)
            if ev.finished:
                remaining.discard(ev.request_id)
    t1 = time.perf_counter()
    return max(first.values()) - t0, t1 - t0, n


def _rand_prompt(rng: random.Random, vocab: int, n: int, bos: int | None) -> list[int]:
    ids = [rng.randrange(3, vocab) for _ in range(n)]
    return ([bos] + ids[:-1]) if bos is not None else ids


def bench_pp(engine, n: int, reps: int) -> float:
    rng = random.Random(0)
    V, bos = engine.model_cfg.vocab_size, engine.tokenizer.bos_id
    _run(engine, [_rand_prompt(rng, V, n, bos)], 1)  # warm-up (compiles kernels)
    times = [_run(engine, [_rand_prompt(rng, V, n, bos)], 1)[0] for _ in range(reps)]
    return n / (sum(times) / len(times))


def bench_tg(engine, n: int, reps: int) -> float:
    bos = engine.tokenizer.bos_id if engine.tokenizer.bos_id is not None else 1
    _run(engine, [[bos]], 16)
    rates = []
    for _ in range(reps):
        ttft, total, got = _run(engine, [[bos]], n + 1)
        rates.append((got - 1) / (total - ttft))
    return sum(rates) / len(rates)


def bench_parallel(engine, seqs: int, prompt: int, gen: int) -> dict:
    # prompts no earlier run has seen (no prefix-cache hits), so the warm-up's prefill steps
    # have the shapes of the timed one's
    rng = random.Random(1000 + seqs)
    V, bos = engine.model_cfg.vocab_size, engine.tokenizer.bos_id
    _run(engine, [_rand_prompt(rng, V, prompt, bos) for _ in range(seqs)], 4)
    ttft, total, got = _run(engine, [_rand_prompt(rng, V, prompt, bos) for _ in range(seqs)], gen)
    return {
        "parallel": seqs,
        "prompt": prompt,
        "gen": gen,
        "generated": got,
        "total_s": total,
        "e2e_tok_s": got / total,
        "decode_tok_s": (got - seqs) / (total - ttft),
    }


def _ttft(engine, prompt: list[int]) -> float:
    return _run(engine, [prompt], 1)[0]


def bench_prefix_ttft(engine) -> dict:
    """TTFT of a 4000-token prompt: cold, then with its first 3900 tokens in the prefix cache."""
    rng = random.Random(7)
    V, bos = engine.model_cfg.vocab_size, engine.tokenizer.bos_id
    _ttft(engine, _rand_prompt(rng, V, 4000, bos))  # warm-up
    cold = _ttft(engine, _rand_prompt(rng, V, 4000, bos))
    base = _rand_prompt(rng, V, 3900, bos)
    _ttft(engine, base)  # fills the cache with the 3900-token prefix
    warm = _ttft(engine, base + [rng.randrange(3, V) for _ in range(100)])
    return {"cold_ms": 1000 * cold, "warm_ms": 1000 * warm, "ratio": warm / cold}


def _step_gaps(engine, ids: set[str], steps: int) -> list[float]:
    gaps, last = [], time.perf_counter()
    for _ in range(steps):
        evs = engine.step()
        now = time.perf_counter()
        if any(ev.request_id in ids and ev.token_ids for ev in evs):
            gaps.append(now - last)
            last = now
    return gaps


def bench_itl(engine) -> dict:
    """p99 gap between tokens of 8 running streams, unloaded and while 8000 tokens prefill."""
    rng = random.Random(11)
    V, bos = engine.model_cfg.vocab_size, engine.tokenizer.bos_id
    params = SamplingParams(max_tokens=3000, temperature=0.0, ignore_eos=True, spec_tokens=0)
    ids = {engine.add_request(_rand_prompt(rng, V, 128, bos), params) for _ in range(8)}
    _step_gaps(engine, ids, 20)
    unloaded = sorted(_step_gaps(engine, ids, 100))
    long_id = engine.add_request(
        _rand_prompt(rng, V, 8000, bos), SamplingParams(max_tokens=1, ignore_eos=True)
    )
    loaded = []
    while long_id in engine.requests:
        loaded += _step_gaps(engine, ids, 1)
    for rid in ids:
        engine.abort(rid)
    p99 = lambda xs: sorted(xs)[max(0, int(0.99 * len(xs)) - 1)]
    return {
        "unloaded_p99_ms": 1000 * p99(unloaded),
        "loaded_p99_ms": 1000 * p99(loaded),
        "loaded_steps": len(loaded),
    }
