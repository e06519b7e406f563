"""Programmatic dependent launch (PDL, compute capability 9.0+): the decode kernels overlap.

A CUDA-graph decode step is ~260 short kernels in a row; between two of them the GPU drains
the first grid, flushes its memory and only then launches and ramps up the second (~0.7 us
per boundary on the H200, plus a DRAM latency ramp at the start of each GEMV). With PDL a
kernel is launched with `launch_pdl`: its programs may become resident while the previous
grid still runs and must wait (`griddepcontrol.wait`) before they touch memory the earlier
kernels write or read; every kernel of ours that is launched so calls `pdl_trigger` (its
dependents may launch once all its programs started) and `pdl_wait` first thing, except
where a load cannot meet a hazard: the weight GEMVs issue the loads of their first weight
tile (constant memory) before they wait, so the weight stream starts under the previous
kernel; the norm loads its weight slice, attention its sequence lengths and first block-table
entries, the QKV + RoPE GEMV its positions, slots and RoPE table. Those step inputs are
uploaded before the step's first kernel (the embedding, torch's, launched without PDL), and
a PDL kernel launches only after that one completed; nothing in the step writes them.
Session 11 (H200, same-call A/Bs, tg128): those loads before the wait +2.2% llama3-8b-q4_k_m,
+3.0% llama2-7b-q4_0; then attention's first block-table entries too (and each next tile's one
tile ahead) +2.2% / +2.3%, at 4,096 tokens of context +5.6% / +9.8%. Kernels launched without
PDL (torch's own, the rest of ours) keep plain stream order.

Memory order stays that of plain launches: `pdl_wait` returns once the previous grid has
completed and its writes are visible, and that grid passed its own wait only after its
predecessor completed, so every earlier kernel is done (a kernel launched without PDL, torch's
own among them, waits for its predecessor as always). One owner decides: `pdl_enabled`.
`LOCALLLM_PDL=0` turns it off, to measure it against plain launches in one process
(`scripts/probe_pdl.py`) or to rule it out; a graph capture that fails with PDL is redone
without it (`engine/cuda_graphs.py`).

Measured (BENCHMARKS.md, session 9, H100): batch-1 decode +18% on llama3-8b-q4_k_m, +10.5% on
llama2-7b-q4_0. Tried and dropped: each GEMV program also asking L2 for its whole weight tile
before the wait (`cp.async.bulk.prefetch.L2`): no faster end to end, its graph 13% slower.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
import triton
import triton.language as tl
import triton.language.extra.cuda as cuda_extra

from localllm.kernels.device import DeviceProps, device_props, interpreting

# the compute capability from which griddepcontrol exists (PTX ISA 7.8, sm_90)
PDL_MIN_CAPABILITY = (9, 0)
# Triton releases before 3.3 have neither `gdc_wait` nor the `launch_pdl` launch option
TRITON_HAS_PDL = hasattr(cuda_extra, "gdc_wait") and hasattr(cuda_extra, "gdc_launch_dependents")


def pdl_supported(props: DeviceProps) -> bool:
    """Whether kernels compiled for this GPU (or GPU profile) may use griddepcontrol, with the
    installed Triton."""
    return TRITON_HAS_PDL and props.capability >= PDL_MIN_CAPABILITY and props.name != "interpreter"


# LOCALLLM_PDL values
_MODES = {"0": False, "1": True}

# set by `forced` (the compile checks: launches captured on meta tensors for a GPU profile)
_FORCED: bool | None = None


@contextlib.contextmanager
def forced(on: bool) -> Iterator[None]:
    """Inside, every launcher takes PDL on or off whatever its device (its launches are
    captured and compiled for a named GPU, not run)."""
    global _FORCED
    before, _FORCED = _FORCED, on
    try:
        yield
    finally:
        _FORCED = before


def pdl_enabled(device: torch.device) -> bool:
    """Whether launches on `device` use PDL: a CUDA GPU of capability 9.0+ (not Triton's
    interpreter, which runs no inline PTX) unless `LOCALLLM_PDL=0`. Read per launch, so a
    benchmark can capture graphs with and without it in one process."""
    if _FORCED is not None:
        return _FORCED
    if device.type != "cuda" or interpreting():
        return False
    return env_enabled() and pdl_supported(device_props(device))


def env_enabled() -> bool:
    """What `LOCALLLM_PDL` asks for (default on); an unknown value is an error, not a silent
    default."""
    value = os.environ.get("LOCALLLM_PDL", "1")
    if value not in _MODES:
        raise ValueError(f"LOCALLLM_PDL={value!r}: expected one of {', '.join(_MODES)}")
    return _MODES[value]


def launch_args(pdl: bool) -> dict[str, bool]:
    """The extra launch keyword of a kernel whose PDL constexpr is `pdl`."""
    return {"launch_pdl": True} if pdl else {}


def pdl_args(device: torch.device) -> dict[str, bool]:
    """The keywords of one launch of a PDL-aware kernel on `device`: its `PDL` constexpr and,
    when on, Triton's `launch_pdl`."""
    on = pdl_enabled(device)
    return {"PDL": on, **launch_args(on)}


@triton.jit
def pdl_trigger(PDL: tl.constexpr):
    """Let the next kernel's programs launch once every program of this one has started."""
    if PDL:
        cuda_extra.gdc_launch_dependents()


@triton.jit
def pdl_wait(PDL: tl.constexpr):
    """Block until the previous kernel has completed and its memory is visible; every load of
    data an earlier kernel writes, and every store, comes after this."""
    if PDL:
        cuda_extra.gdc_wait()


@triton.jit
def pdl_enter(PDL: tl.constexpr):
    """`pdl_trigger` then `pdl_wait`: the start of a kernel with nothing to do before it waits."""
    pdl_trigger(PDL)
    pdl_wait(PDL)
