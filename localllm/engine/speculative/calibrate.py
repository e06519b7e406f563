"""Measure what a verify step costs on this engine: its model, its GPU, its host.

A verify step of k drafts costs `verify_cost(k)` plain decode steps, and that price decides how
much to draft (policy.best_draft_len). It is not one number: on an 8B model a decode step is
GPU-bound and a verify step costs ~1.8x at k = 4; on a 22M model a plain step hides its host
time behind the GPU's (step overlap) but a verify step cannot, so it costs ~1.5-2.2x nearly
whatever k.
So on a GPU the engine times its own steps at start-up (`measure_price`): plain decode steps
and verify steps with forced drafts, one short sequence, as generation runs them (CUDA graphs,
step overlap), and fits the line of policy.verify_cost through them. The price is kept in the
cache folder per model file, GPU, draft limit and KV dtype (`engine_price`): later starts reuse
it, so the same prompt drafts the same way (and gives the same greedy tokens) run after run;
timing noise would otherwise move the price, and with it which rows are verified together.

`step_seconds` is also what scripts/spec_measure.py and scripts/probe_verify.py time steps with.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

import torch

from localllm.core import SamplingParams
from localllm.device import cache_root, device_name

if TYPE_CHECKING:
    from localllm.engine.engine import LLMEngine

log = logging.getLogger("localllm")

# start-up measurement: prompt tokens of the one sequence, steps timed per point after a few
# untimed ones (graph warm-up, the pinned staging buffers' first use)
CALIBRATE_CONTEXT = 64
CALIBRATE_STEPS = 12
CALIBRATE_WARMUP = 4
CALIBRATE_K = 4  # verify steps are timed at k = 4 and at the draft limit
# a measured verify step at CALIBRATE_K dearer than a plain step by less than this is not
# believed (`plausible`): an 8B measures ~0.9, pycode-22m ~0.3 (a verify step cannot hide
# its host time as a plain step does)
MIN_VERIFY_EXTRA = 0.05
PRICE_CACHE = "verify_price.json"  # in cache_root(): key -> [fixed, per_draft] as measured


def sync(engine: LLMEngine) -> None:
    if engine.runner.device.type == "cuda":
        torch.cuda.synchronize(engine.runner.device)


def _decode_tokens(steps: int, warmup: int, k: int) -> int:
    """max_tokens of a timed sequence: every step may take k + 1 tokens, and some slack."""
    return (steps + warmup) * (k + 1) + 64


def step_seconds(engine: LLMEngine, batch: int, k: int, steps: int, context: int = 512,
                 around: AbstractContextManager | None = None,
                 warmup: int = 3) -> float:  # fmt: skip
    """Seconds per engine step of `batch` decoding sequences that each verify k drafts (k = 0:
    plain decode, chained by step overlap as a sequence that does not speculate is). Drafts
    are forced (a fixed token), so the cost does not depend on them. `around` (a profiler,
    say) is entered around the timed steps."""
    rng = random.Random(batch * 100 + k)
    V = engine.model_cfg.vocab_size
    prompts = [[rng.randrange(3, V) for _ in range(context)] for _ in range(batch)]
    n = _decode_tokens(steps, warmup, k)
    params = SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True, spec_tokens=0)
    real = engine.speculator.propose

    def forced(decodes) -> None:
        for s in decodes:
            s.draft_ids = [3] * k

    # forced from the prefill on: with step overlap the first decode step is launched as the
    # prefill's last chunk is taken, and a plain step it launched would chain on (k = 0
    # requests are always quiet), never proposing again
    engine.speculator.propose = forced  # type: ignore[method-assign]
    ids = [engine.add_request(p, params) for p in prompts]
    try:
        while any(s.in_prefill for s in engine.scheduler.running) or engine.scheduler.waiting:
            engine.step()
        for _ in range(warmup):
            engine.step()
        sync(engine)
        with around or nullcontext():
            t0 = time.perf_counter()
            for _ in range(steps):
                engine.step()
            sync(engine)
            return (time.perf_counter() - t0) / steps
    finally:
        engine.speculator.propose = real  # type: ignore[method-assign]
        for rid in ids:
            engine.abort(rid)


def price_line(costs: dict[int, float]) -> tuple[float, float]:
    """(fixed, per_draft) of the line through the costs (plain steps) at the two smallest k,
    with one k: all of the price per draft, no fixed part."""
    pts = sorted((k, c - 1.0) for k, c in costs.items())
    if len(pts) < 2:
        k, c = pts[0]
        return 0.0, c / k
    (k1, c1), (k2, c2) = pts[:2]
    per = (c2 - c1) / (k2 - k1)
    return c1 - per * k1, per


def calibration_fits(k_max: int, max_model_len: int) -> bool:
    """Whether the start-up measurement's sequence fits the context."""
    return (
        CALIBRATE_CONTEXT + _decode_tokens(CALIBRATE_STEPS, CALIBRATE_WARMUP, k_max)
        <= max_model_len
    )


def calibrated_ks(k_max: int) -> list[int]:
    """The draft counts the start-up measurement times verify steps at."""
    return sorted({min(CALIBRATE_K, k_max), k_max})


def measure_price(engine: LLMEngine, k_max: int) -> tuple[float, float]:
    """(fixed, per_draft): the verify price of this engine, from its own step times at batch 1
    (k = 4 and k_max, or k_max alone when it is smaller)."""
    t0 = time.perf_counter()
    ks = calibrated_ks(k_max)

    def seconds(k: int) -> float:
        return step_seconds(engine, 1, k, CALIBRATE_STEPS, CALIBRATE_CONTEXT,
                            warmup=CALIBRATE_WARMUP)  # fmt: skip

    plain = seconds(0)
    costs = {k: seconds(k) / plain for k in ks}
    fixed, per = price_line(costs)
    log.info("verify steps cost %s plain decode steps (%.0f us) -> price %.3f + %.3f k (%.1f s)",
             ", ".join(f"{c:.2f}x at k={k}" for k, c in costs.items()), 1e6 * plain, fixed, per,
             time.perf_counter() - t0)  # fmt: skip
    return fixed, per


def price_key(engine: LLMEngine, k_max: int) -> str:
    """What the measured price depends on: the weights, the GPU, the draft limit, the KV dtype."""
    dev = device_name(engine.runner.device)
    return f"{engine.source.model_id}|{dev}|k={k_max}|kv={engine.cfg.kv_dtype}"


def plausible(price: tuple[float, float], k_max: int) -> bool:
    """Whether a measured (fixed, per_draft) can be this engine's lasting price: a verify step
    at the first measured k (`calibrated_ks`) dearer than a plain step by MIN_VERIFY_EXTRA.
    A step of k + 1 rows within a few percent of a one-row step says the timed steps waited
    on something else. (Session 34, H200: pycode-22m's price, measured by a test that ran beside
    a 16-core compiler build and stored, was read back by a later start as a fixed part of at
    most 0 and at most 0.01 a draft; a quiet machine measures a fixed part of 0.21-0.52.)"""
    fixed, per = price
    return fixed + per * calibrated_ks(k_max)[0] >= MIN_VERIFY_EXTRA


def engine_price(engine: LLMEngine, k_max: int) -> tuple[float, float]:
    """The measured (fixed, per_draft) of this engine: from the cache, else measured now and
    stored (a cache that cannot be read or written is only a lost shortcut). A price that is
    not `plausible` is measured once more; if it still is not, it serves this run and is not
    stored, so a later start measures again instead of drafting by it for good."""
    path, key = cache_root() / PRICE_CACHE, price_key(engine, k_max)
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        table = {}
    hit = table.get(key) if isinstance(table, dict) else None
    if isinstance(hit, list) and len(hit) == 2:
        log.info("verify price %.3f + %.3f k (measured before: %s)", hit[0], hit[1], path)
        return float(hit[0]), float(hit[1])
    price = measure_price(engine, k_max)
    if not plausible(price, k_max):  # verify steps as cheap as plain ones: a busy host
        log.warning("verify price %.3f + %.3f k is not believable (verify steps as cheap as "
                    "plain ones): measuring again", *price)  # fmt: skip
        price = measure_price(engine, k_max)
        if not plausible(price, k_max):
            log.warning("verify price %.3f + %.3f k again: used for this run, not stored", *price)
            return price
    table = table if isinstance(table, dict) else {}
    table[key] = list(price)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(table, indent=1))
        tmp.replace(path)
    except OSError as e:
        log.warning("could not store the verify price in %s: %s", path, e)
    return price
