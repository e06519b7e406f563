"""Memory a model needs: weights, the paged KV pool for a context, and this GPU's room.

KV sizes come from the engine's own pool arithmetic (`kv_cache.bytes_per_block`), so what
`info` says is what the engine allocates: whole blocks of `block_size` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from localllm.config import EngineConfig, ModelConfig
from localllm.engine.kv_cache import bytes_per_block

INFO_KV_DTYPES = ("fp16", "int8", "fp8")  # the GPU pool's choices (fp8: sm_89+)


def engine_default(name: str) -> Any:
    """A default of EngineConfig (one owner for block size, memory utilization ...)."""
    return next(f.default for f in fields(EngineConfig) if f.name == name)


@dataclass(frozen=True)
class KVNeed:
    dtype: str
    bytes_per_token: float  # one token across all layers, K and V (+ scales)
    nbytes: int  # the blocks a `context`-token sequence takes


def kv_needs(cfg: ModelConfig, context: int, block_size: int) -> list[KVNeed]:
    out = []
    for dtype in INFO_KV_DTYPES:
        per_block = bytes_per_block(cfg, block_size, dtype)
        blocks = -(-context // block_size)
        out.append(KVNeed(dtype, per_block / block_size, blocks * per_block))
    return out


@dataclass(frozen=True)
class GpuRoom:
    name: str
    free: int  # bytes free on the device now
    total: int
    utilization: float  # --gpu-memory-utilization

    @property
    def usable(self) -> int:
        """What the engine may take: total x utilization, less what other processes hold."""
        return int(self.total * self.utilization) - (self.total - self.free)

    def fits(self, nbytes: int) -> bool:
        return nbytes <= self.usable

    def max_context(self, weights: int, kv: KVNeed, block_size: int) -> int:
        """Tokens of KV that fit next to the weights, in whole blocks."""
        room = self.usable - weights
        per_block = int(kv.bytes_per_token * block_size)
        return max(0, room // per_block * block_size)


def current_gpu(utilization: float) -> GpuRoom | None:
    """The CUDA device's memory now, or None without a CUDA GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    return GpuRoom(torch.cuda.get_device_name(), int(free), int(total), utilization)
