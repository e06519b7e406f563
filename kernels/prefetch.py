"""L2 prefetch of constant data from a kernel that leaves the DRAM idle (experiment, issue 16).

A decode step at short context alternates weight GEMVs (DRAM-bound) with small latency-bound
kernels; attention at depth 0 runs ~6-7 us a layer on an H200 and reads a few hundred KB, and
the GEMV after it (O) has already loaded its whole tile before its PDL wait. The weights of
the gate+up GEMV two kernels later are constant, so attention's programs can ask L2 for the
first part of them (`prefetch.global.L2`: no register, nothing waits on it) and the DRAM works
through the window. Off by default; `LOCALLLM_L2_PREFETCH=MB[:at]` turns it on for a measure:
MB the bytes per launch (spread over the planes of the weight in proportion: the first rows of
each plane), `at` 1 (right after attention's wait, the default) or 2 (after its KV loop).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from localllm.kernels.device import MB, DeviceProps, interpreting

LINE = 128  # bytes an L2 prefetch asks for (one cache line)


@dataclass(frozen=True)
class Prefetch:
    """One launch's prefetch: up to two byte ranges (their tensors and byte counts), where in
    the kernel (`at`: 1 after its wait, 2 after its main loop) and the longest context at which
    a decode program still issues it (longer ones read enough KV to keep the DRAM busy and
    would evict the lines before use)."""

    ranges: tuple[tuple[torch.Tensor, int], ...]
    at: int
    max_seq: int


def requested() -> tuple[int, int]:
    """(bytes per launch, where) from `LOCALLLM_L2_PREFETCH` ((0, 0): off)."""
    value = os.environ.get("LOCALLLM_L2_PREFETCH", "0")
    mb, _, at = value.partition(":")
    try:
        nbytes, where = int(float(mb) * MB), int(at or 1)
    except ValueError:
        raise ValueError(f"LOCALLLM_L2_PREFETCH={value!r}: expected MB[:1|2]") from None
    if where not in (1, 2) or nbytes < 0:
        raise ValueError(f"LOCALLLM_L2_PREFETCH={value!r}: expected MB[:1|2]")
    return nbytes, where


def plan_prefetch(planes: Sequence[torch.Tensor], kv_bytes_per_token: int,
                  props: DeviceProps) -> Prefetch | None:  # fmt: skip
    """The prefetch of the first rows of a weight's `planes` (the two largest), or None (off,
    or no GPU). `kv_bytes_per_token`: one layer's K + V bytes of a token (the context limit:
    a quarter of the L2 in KV)."""
    nbytes, at = requested()
    if nbytes == 0 or not planes or not planes[0].is_cuda or interpreting() or not props.l2_bytes:
        return None
    big = sorted(planes, key=lambda p: p.nbytes, reverse=True)[:2]
    total = sum(p.nbytes for p in big)
    frac = min(1.0, nbytes / total)
    ranges = tuple((p, int(p.nbytes * frac)) for p in big)
    return Prefetch(ranges, at, props.l2_bytes // 4 // max(kv_bytes_per_token, 1))


def prefetch_args(pf: Prefetch | None, dummy: torch.Tensor) -> tuple[object, ...]:
    """The (PF0, PF0_BYTES, PF1, PF1_BYTES, pf_max_seq) kernel arguments of `pf`."""
    if pf is None:
        return dummy, 0, dummy, 0, 0
    (p0, n0), (p1, n1) = pf.ranges[0], pf.ranges[-1] if len(pf.ranges) > 1 else (dummy, 0)
    return p0, n0, p1, n1, pf.max_seq


@triton.jit
def _prefetch_range(P, nbytes, prog, nprog, LINES: tl.constexpr):
    """Program `prog` of `nprog` asks L2 for its contiguous share of the lines of [P, P +
    nbytes)."""
    lines = tl.cdiv(nbytes, 128)
    per = tl.cdiv(lines, nprog)
    lo = prog * per
    hi = tl.minimum(lo + per, lines)
    base = P.to(tl.pointer_type(tl.int8))
    for l0 in range(lo, hi, LINES):
        ln = l0 + tl.arange(0, LINES)
        ptr = base + ln.to(tl.int64) * 128
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.s32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
            "=r,l,r", [ptr, (ln < hi).to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1,
        )  # fmt: skip


@triton.jit
def l2_prefetch(P0, n0, P1, n1, prog, nprog, LINES: tl.constexpr):
    """Program `prog` of `nprog` prefetches its share of two byte ranges into L2."""
    _prefetch_range(P0, n0, prog, nprog, LINES)
    _prefetch_range(P1, n1, prog, nprog, LINES)
