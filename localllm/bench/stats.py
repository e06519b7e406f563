"""Summaries of measured samples: mean and spread of repetitions, latency percentiles, and
goodput under a service-level objective. Pure Python."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

PERCENTILES = (50, 90, 99)


def spread(samples: Sequence[float]) -> dict:
    """Mean, standard deviation (0 for one sample), min, max and the samples themselves."""
    xs = [float(x) for x in samples]
    return {
        "mean": statistics.fmean(xs),
        "stdev": statistics.stdev(xs) if len(xs) > 1 else 0.0,
        "min": min(xs),
        "max": max(xs),
        "samples": xs,
    }


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation between order statistics (numpy's
    default), so p99 of 100 gaps is not simply the largest."""
    xs = sorted(samples)
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def percentiles_ms(seconds: Sequence[float]) -> dict:
    """{"p50": ms, "p90": ms, "p99": ms, "mean": ms} of samples given in seconds (None when
    there are none, e.g. inter-token gaps of one-token requests)."""
    if not seconds:
        return {f"p{q}": None for q in PERCENTILES} | {"mean": None}
    out = {f"p{q}": 1000.0 * percentile(seconds, q) for q in PERCENTILES}
    out["mean"] = 1000.0 * statistics.fmean(seconds)
    return out


def meets_slo(ttft_s: float, mean_itl_s: float | None, ttft_ms: float, itl_ms: float) -> bool:
    """A request meets the objective when its first token and its mean inter-token gap are
    both within the limits (DistServe's goodput definition)."""
    return 1000.0 * ttft_s <= ttft_ms and (mean_itl_s is None or 1000.0 * mean_itl_s <= itl_ms)
