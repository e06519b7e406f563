"""What the kernel launch rules may know about a GPU: one `DeviceProps` record, read from
torch.cuda on a GPU (`device_props`), or a named profile (`PROFILES`) for checks without one.

Every launch rule that depends on the GPU takes its limits from here (split-K and KV
partition counts from `sm_count`, the fused GEMM's tile from `smem_per_block`, the split-K
workspace from `l2_bytes`), so a config chosen for a 99 KB RTX 4090 is one that fits it.

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


_AMPERE = dict(capability=(8, 6), smem_per_block=99 * KB, max_threads_per_sm=1536)
_ADA = dict(capability=(8, 9), smem_per_block=99 * KB, max_threads_per_sm=1536)
_HOPPER = dict(capability=(9, 0), smem_per_block=227 * KB, sm_count=132, l2_bytes=50 * MB)

PROFILES: dict[str, DeviceProps] = {
    p.name: p
    for p in (
        DeviceProps("rtx3060", sm_count=28, l2_bytes=3 * MB, bandwidth_gbs=360, **_AMPERE),
        DeviceProps("rtx3090", sm_count=82, l2_bytes=6 * MB, bandwidth_gbs=936, **_AMPERE),
        DeviceProps("rtx4060", sm_count=24, l2_bytes=24 * MB, bandwidth_gbs=272, **_ADA),
        DeviceProps("rtx4090", sm_count=128, l2_bytes=72 * MB, bandwidth_gbs=1008, **_ADA),
        DeviceProps("h100", bandwidth_gbs=3350, **_HOPPER),  # type: ignore[arg-type]
        DeviceProps("h200", bandwidth_gbs=4800, **_HOPPER),  # type: ignore[arg-type]
    )
}
# the consumer GPUs every dispatchable kernel config must fit (`kernels/checks/`)
CONSUMER = ("rtx3060", "rtx3090", "rtx4060", "rtx4090")

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
