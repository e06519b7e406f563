"""Subsets of the enumerated launches to compile. `variants`: one launch per compiled config
(kernel, argument types, constexprs, warps, stages), leaving out Triton's specializations of
integer arguments (== 1, divisible by 16), which change address arithmetic and vector widths
but no tile size. `representative`, for CI: every value each kernel's constexprs, argument
types, warps and stages take appears in at least one chosen launch, and the launches are
taken largest first (the product of their tile constexprs, warps and stages), so each
kernel's biggest tiles are always among them."""

from __future__ import annotations

import math

from localllm.kernels.checks.capture import Launch


def features(launch: Launch) -> set[tuple]:
    """What one launch covers: (kernel, name, value) of every constexpr and argument type,
    and its warps and stages."""
    k = launch.kernel
    out = {(k, name, repr(v)) for name, v in launch.constexprs}
    out |= {(k, name, t) for name, t in launch.signature if t != "constexpr"}
    return out | {(k, "num_warps", launch.num_warps), (k, "num_stages", launch.num_stages)}


def size(launch: Launch) -> int:
    """Work per program, roughly: integer constexprs (tiles) x warps x stages."""
    tiles = [v for _, v in launch.constexprs if isinstance(v, int) and not isinstance(v, bool)]
    return math.prod(max(v, 1) for v in tiles) * launch.num_warps * launch.num_stages


def representative(launches: list[Launch]) -> list[Launch]:
    """Largest first, keep a launch while it covers something not yet covered."""
    covered: set[tuple] = set()
    chosen = []
    for launch in sorted(launches, key=size, reverse=True):
        new = features(launch) - covered
        if new:
            chosen.append(launch)
            covered |= new
    return chosen


def variants(launches: list[Launch]) -> list[Launch]:
    """One launch per (kernel, argument types, constexprs, warps, stages)."""
    out: dict[tuple, Launch] = {}
    for launch in launches:
        out.setdefault((launch.config, launch.signature), launch)
    return list(out.values())
