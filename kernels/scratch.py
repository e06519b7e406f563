"""Persistent device scratch. `ZeroScratch` is zero between kernel launches: split-K partial sums
and the counters of "the last program to finish does the epilogue" kernels. Each launch leaves
what it used zeroed again, so CUDA graphs replay on it without a memset. Buffers live for the
process: a graph keeps the address it was captured with, so a bigger request adds a buffer and
never swaps out one that graphs may still use. `Scratch`: the same, not zeroed."""

from __future__ import annotations

import torch


class ZeroScratch:
    zeroed = True  # the buffers start zeroed and every user leaves them so

    def __init__(self, dtype: torch.dtype, min_numel: int = 1 << 16) -> None:
        self.dtype = dtype
        self.min_numel = min_numel
        self._bufs: dict[torch.device, list[torch.Tensor]] = {}

    def get(self, device: torch.device, n: int) -> torch.Tensor:
        """[n] (a view of the newest buffer on `device`): zeros, which the caller leaves zeroed,
        or, in a `Scratch`, whatever the last launch left."""
        bufs = self._bufs.setdefault(device, [])
        if not bufs or bufs[-1].numel() < n:
            make = torch.zeros if self.zeroed else torch.empty
            bufs.append(make(max(n, self.min_numel), dtype=self.dtype, device=device))
        return bufs[-1][:n]

    def buffers(self) -> list[torch.Tensor]:
        """Every buffer handed out so far (tests check they are all zero)."""
        return [b for bufs in self._bufs.values() for b in bufs]


class Scratch(ZeroScratch):
    """Persistent device scratch whose contents are the kernels' own (each launch writes what it
    reads): the stream-K GEMM's partial tiles. Grows as ZeroScratch does."""

    zeroed = False
