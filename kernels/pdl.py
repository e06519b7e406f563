"""Programmatic dependent launch (PDL, compute capability 9.0+): the decode kernels overlap.

A CUDA-graph decode step is ~260 short kernels in a row; between two of them the GPU drains
the first grid, flushes its memory and only then launches and ramps up the second (~0.7 us
per boundary on the H200, plus a DRAM latency ramp at the start of each GEMV). With PDL a
kernel is launched with `launch_pdl`: its programs may become resident while the previous
grid still runs and must wait (`griddepcontrol.wait`) before they touch memory the earlier
kernels write or read; every kernel of ours that is launched so calls `pdl_trigger` (its
dependents may launch once all its programs started) and `pdl_wait` first thing, except the
weight GEMVs, which issue the loads of their first weight tile (constant memory, no hazard)
before they wait, so the weight stream starts under the previous kernel.

Memory order stays that of plain launches: `pdl_wait` returns once the previous grid has
completed and its writes are visible, and that grid passed its own wait only after its
predecessor completed, so every earlier kernel is done (a kernel launched without PDL, torch's
own among them, waits for its predecessor as always). One owner decides: `pdl_mode`.

The weight GEMVs can also ask L2 for their whole weight tile before they wait
(`cp.async.bulk.prefetch.L2`, one instruction per plane from one thread: no registers held),
so DRAM streams the next matrix while the norm, SiLU or attention kernel before it runs.
`LOCALLLM_PDL`: "0" off, "1" PDL only, "2" (default) PDL and the L2 prefetch; the knob exists
to measure each step against the one before in one process (`scripts/probe_pdl.py`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
import triton
import triton.language as tl

from localllm.kernels.device import DeviceProps, device_props

# the compute capability from which griddepcontrol exists (PTX ISA 7.8, sm_90)
PDL_MIN_CAPABILITY = (9, 0)


def pdl_supported(props: DeviceProps) -> bool:
    """Whether kernels compiled for this GPU (or GPU profile) may use griddepcontrol."""
    return props.capability >= PDL_MIN_CAPABILITY and props.name != "interpreter"


# LOCALLLM_PDL values: off, PDL, PDL + L2 prefetch of the weight tiles
PDL_OFF, PDL_ON, PDL_PREFETCH = 0, 1, 2
_MODES = {"0": PDL_OFF, "1": PDL_ON, "2": PDL_PREFETCH}


# set by `forced` (the compile checks: launches captured on meta tensors for a GPU profile)
_FORCED: int | None = None


@contextlib.contextmanager
def forced(mode: int) -> Iterator[None]:
    """Inside, every launcher takes `mode` whatever its device (its launches are captured
    and compiled for a named GPU, not run)."""
    global _FORCED
    before, _FORCED = _FORCED, mode
    try:
        yield
    finally:
        _FORCED = before


def pdl_mode(device: torch.device) -> int:
    """PDL_OFF / PDL_ON / PDL_PREFETCH for launches on `device`: off unless a CUDA GPU of
    capability 9.0+ (not Triton's interpreter, which runs no inline PTX); there
    `LOCALLLM_PDL` (default "2"). Read per launch, so a benchmark can capture graphs of each
    mode in one process; an unknown value is an error, not a silent default."""
    if _FORCED is not None:
        return _FORCED
    if device.type != "cuda" or os.environ.get("TRITON_INTERPRET") == "1":
        return PDL_OFF
    return env_mode() if pdl_supported(device_props(device)) else PDL_OFF


def env_mode() -> int:
    """The mode `LOCALLLM_PDL` asks for (default PDL_PREFETCH)."""
    value = os.environ.get("LOCALLLM_PDL", "2")
    if value not in _MODES:
        raise ValueError(f"LOCALLLM_PDL={value!r}: expected one of {', '.join(_MODES)}")
    return _MODES[value]


def pdl_enabled(device: torch.device) -> bool:
    """Whether launches on `device` use PDL (`pdl_mode` not off)."""
    return pdl_mode(device) != PDL_OFF


def prefetch_row_bytes(planes: list[torch.Tensor]) -> list[int] | None:
    """Bytes per weight row of each plane ([N, ...] row-major) when every plane's rows start
    on 16-byte boundaries (what the bulk L2 prefetch needs), else None: no prefetch."""
    rbs = []
    for p in planes:
        rb = p.stride(0) * p.element_size()  # (meta tensors: data_ptr 0)
        if not p.is_contiguous() or rb % 16 or p.data_ptr() % 16:
            return None
        rbs.append(rb)
    return rbs


def launch_args(pdl: bool) -> dict[str, bool]:
    """The extra launch keyword of a kernel whose PDL constexpr is `pdl`."""
    return {"launch_pdl": True} if pdl else {}


@triton.jit
def pdl_trigger(PDL: tl.constexpr):
    """Let the next kernel's programs launch once every program of this one has started."""
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def pdl_wait(PDL: tl.constexpr):
    """Block until the previous kernel has completed and its memory is visible; every load of
    data an earlier kernel writes, and every store, comes after this."""
    if PDL:
        tl.extra.cuda.gdc_wait()


# one thread of the program asks L2 for nbytes (a multiple of 16) from a 16-byte aligned address
_L2_PREFETCH = tl.constexpr(
    "{ .reg .u32 t_; .reg .pred p_; mov.u32 t_, %tid.x; setp.eq.u32 p_, t_, 0; "
    "@p_ cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }"
)


@triton.jit
def l2_prefetch(ptr, nbytes):
    """Ask L2 for nbytes (> 0, a multiple of 16) at ptr (16-byte aligned); sm_90+."""
    tl.inline_asm_elementwise(_L2_PREFETCH, "=r,l,r", [ptr, nbytes.to(tl.int32)],
                              dtype=tl.int32, is_pure=False, pack=1)  # fmt: skip


@triton.jit
def prefetch_plane_rows(p, rb, row0, nrows, g_lo, g_hi, G, BN: tl.constexpr,
                        WHOLE: tl.constexpr):  # fmt: skip
    """L2 prefetch of weight rows [row0, row0 + nrows) (nrows <= BN) of a plane of rb bytes
    per row (rb % 16 == 0), their share of groups [g_lo, g_hi) of G: one request for the
    whole rows (WHOLE), else one per row (a K split's part, widened to 16-byte bounds)."""
    base = p.to(tl.pointer_type(tl.uint8)) + row0.to(tl.int64) * rb
    if WHOLE:
        l2_prefetch(base, nrows * rb)
    else:
        lo = (rb * g_lo // G) // 16 * 16
        hi = tl.minimum(rb, (rb * g_hi + G - 1) // G + 15) // 16 * 16
        for r in tl.static_range(BN):
            if r < nrows:
                l2_prefetch(base + r * rb + lo, hi - lo)


@triton.jit
def prefetch_weight_tile(p0, p1, p2, p3, p4, rb0, rb1, rb2, rb3, rb4, row0, nrows, g_lo, g_hi,
                         G, NP: tl.constexpr, BN: tl.constexpr, WHOLE: tl.constexpr):  # fmt: skip
    """`prefetch_plane_rows` over the NP planes of a quantized weight."""
    prefetch_plane_rows(p0, rb0, row0, nrows, g_lo, g_hi, G, BN, WHOLE)
    if NP > 1:
        prefetch_plane_rows(p1, rb1, row0, nrows, g_lo, g_hi, G, BN, WHOLE)
    if NP > 2:
        prefetch_plane_rows(p2, rb2, row0, nrows, g_lo, g_hi, G, BN, WHOLE)
    if NP > 3:
        prefetch_plane_rows(p3, rb3, row0, nrows, g_lo, g_hi, G, BN, WHOLE)
    if NP > 4:
        prefetch_plane_rows(p4, rb4, row0, nrows, g_lo, g_hi, G, BN, WHOLE)


@triton.jit
def pdl_enter(PDL: tl.constexpr):
    """`pdl_trigger` then `pdl_wait`: the start of a kernel with nothing to do before it waits."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
