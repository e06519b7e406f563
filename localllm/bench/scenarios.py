"""The copy bandwidth that bounds decode, measured at the start of every `localllm bench` run
(the scenarios themselves live in bench/suite/)."""

from __future__ import annotations

import time


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
