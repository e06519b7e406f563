"""What the kernel launch rules may know about a GPU: one `DeviceProps` record, read from
torch.cuda on a GPU (`device_props`), or a named profile (`PROFILES`) for checks without one.

Every launch rule that depends on the GPU takes its limits from here (split-K and KV
partition counts from `sm_count`, the fused GEMM's and attention's tiles from
`smem_per_block`), so a config chosen for a 99 KB RTX 4090 is one that fits it. `l2_bytes`
and `bandwidth_gbs` describe the profiles; no launch rule reads them yet (none of the H200
tunings depends on the L2's size: see BENCHMARKS.md, "What to expect on an RTX 4090").

The profile figures (one line each, cited):
  per compute capability, CUDA C++ Programming Guide, "Technical Specifications per Compute
  Capability": shared memory per block (opt-in) 99 KB on 8.6 / 8.9, 227 KB on 9.0; 64 K
  32-bit registers per SM; 255 registers per thread; 1536 (8.6, 8.9) / 2048 (9.0) threads
  per SM.
  per GPU: SMs, L2 and bandwidth from NVIDIA's whitepapers and product pages: GA102 (RTX 3090:
  82 SMs, 6 MB L2, 936 GB/s), GA106 (RTX 3060 12 GB: 28 SMs, 3 MB L2, 360 GB/s), AD102 (RTX
  4090: 128 SMs, 72 MB L2, 1008 GB/s), AD107 (RTX 4060: 24 SMs, 24 MB L2, 272 GB/s), GH100
  (H100 SXM5: 132 SMs, 50 MB L2, 3.35 TB/s; H200: the same chip with 4.8 TB/s HBM3e).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace

import torch

KB = 1024
MB = 1024 * 1024


@dataclass(frozen=True)
class DeviceProps:
    name: str
    capability: tuple[int, int]  # CUDA compute capability (major, minor)
    sm_count: int
    smem_per_block: int  # bytes of shared memory one program may use (the opt-in limit)
    l2_bytes: int
    regs_per_sm: int = 65536  # 32-bit registers
    max_regs_per_thread: int = 255
    max_threads_per_sm: int = 2048
    bandwidth_gbs: float = 0.0  # DRAM bandwidth, GB/s (0: unknown; not used by launch rules)

    @property
    def arch(self) -> int:
        """The compute capability as Triton's `GPUTarget` arch: 86, 89, 90."""
        return 10 * self.capability[0] + self.capability[1]


def _consumer(name: str, arch: tuple[int, int], sms: int, l2_mb: int, gbs: float) -> DeviceProps:
    """An RTX 30xx (8.6) / 40xx (8.9): 99 KB per block, 1536 threads per SM."""
    return DeviceProps(name, arch, sms, 99 * KB, l2_mb * MB, max_threads_per_sm=1536,
                       bandwidth_gbs=gbs)  # fmt: skip


def _hopper(name: str, gbs: float) -> DeviceProps:
    """GH100 (H100 SXM5, H200): 132 SMs, 227 KB per block, 50 MB L2."""
    return DeviceProps(name, (9, 0), 132, 227 * KB, 50 * MB, bandwidth_gbs=gbs)


PROFILES: dict[str, DeviceProps] = {
    p.name: p
    for p in (
        _consumer("rtx3060", (8, 6), 28, 3, 360),
        _consumer("rtx3090", (8, 6), 82, 6, 936),
        _consumer("rtx4060", (8, 9), 24, 24, 272),
        _consumer("rtx4090", (8, 9), 128, 72, 1008),
        _hopper("h100", 3350),
        _hopper("h200", 4800),
    )
}
# the consumer GPUs every dispatchable kernel config must fit (`kernels/checks/`)
CONSUMER = ("rtx3060", "rtx3090", "rtx4060", "rtx4090")


def interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter (`TRITON_INTERPRET=1`), which executes no
    inline PTX: the kernels take their plain-Triton paths."""
    return os.environ.get("TRITON_INTERPRET") == "1"


# Triton's interpreter on the CPU: the H200's limits with 4 SMs, so kernel tests on small
# shapes still split K and run several programs
INTERPRETER = replace(PROFILES["h200"], name="interpreter", sm_count=4)


def profile(name: str) -> DeviceProps:
    """A named profile; ValueError naming the known ones otherwise."""
    if name not in PROFILES:
        raise ValueError(f"unknown GPU profile {name!r} (known: {', '.join(PROFILES)})")
    return PROFILES[name]


@functools.lru_cache(maxsize=16)
def device_props(device: torch.device) -> DeviceProps:
    """The properties of a CUDA device from torch; `INTERPRETER` for any other device."""
    if device.type != "cuda":
        return INTERPRETER
    p = torch.cuda.get_device_properties(device)
    return DeviceProps(
        name=p.name,
        capability=(p.major, p.minor),
        sm_count=p.multi_processor_count,
        smem_per_block=getattr(p, "shared_memory_per_block_optin", 48 * KB),
        l2_bytes=getattr(p, "L2_cache_size", 0),
        regs_per_sm=getattr(p, "regs_per_multiprocessor", 65536),
        max_threads_per_sm=getattr(p, "max_threads_per_multi_processor", 2048),
    )
