"""The paged KV pool: dtype choice, layout, per-block size, and its sizing from a memory budget
(KVPoolPlanner: the only place that decides how many blocks the pool has)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from localllm.config import EngineConfig, ModelConfig
from localllm.engine.block_manager import cdiv
from localllm.errors import LocalLLMError, OutOfMemoryError
from localllm.kernels.attention.kv_dtypes import KV_DTYPES
from localllm.model.batch import KVCache

log = logging.getLogger("localllm")

QUANTIZED = tuple(name for name, kd in KV_DTYPES.items() if kd.quantized)


def resolve_kv_dtype(name: str, device: torch.device) -> str:
    """Validate --kv-dtype for this device; "auto" = fp16 on CUDA, fp32 on CPU."""
    if name == "auto":
        return "fp16" if device.type == "cuda" else "fp32"
    need = KV_DTYPES[name].min_capability if name in KV_DTYPES else None
    if need is not None and device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) < need:
            gpu = torch.cuda.get_device_name(device)
            raise LocalLLMError(
                f"--kv-dtype {name} needs {KV_DTYPES[name].needs} (compute capability "
                f"{need[0]}.{need[1]}+); {gpu} is {major}.{minor}. Use --kv-dtype int8 for the "
                f"same memory saving."
            )
    return name


def bytes_per_block(cfg: ModelConfig, block_size: int, dtype_name: str) -> int:
    """Bytes one block takes across all layers (K and V, plus scales when quantized)."""
    elem = torch.empty((), dtype=KV_DTYPES[dtype_name].dtype).element_size()
    per_layer = 2 * cfg.n_kv_heads * block_size * cfg.head_dim * elem
    if dtype_name in QUANTIZED:
        per_layer += 2 * cfg.n_kv_heads * block_size * 4
    return per_layer * cfg.n_layers


def allocate_kv_cache(
    cfg: ModelConfig, num_blocks: int, block_size: int, dtype_name: str, device: torch.device
) -> KVCache:
    L, H, D = cfg.n_layers, cfg.n_kv_heads, cfg.head_dim
    dtype = KV_DTYPES[dtype_name].dtype
    kv = torch.zeros((L, 2, num_blocks, H, block_size, D), dtype=dtype, device=device)
    scales = None
    if dtype_name in QUANTIZED:
        scales = torch.ones((L, 2, num_blocks, H, block_size), dtype=torch.float32, device=device)
    return KVCache(
        k=[kv[i, 0] for i in range(L)],
        v=[kv[i, 1] for i in range(L)],
        k_scale=[scales[i, 0] if scales is not None else None for i in range(L)],
        v_scale=[scales[i, 1] if scales is not None else None for i in range(L)],
        num_blocks=num_blocks,
        block_size=block_size,
        dtype_name=dtype_name,
        pool=kv,
        scale_pool=scales,
    )


def plan_num_blocks(
    cfg: ModelConfig, block_size: int, dtype_name: str, budget_bytes: int, max_model_len: int
) -> int:
    """How many blocks fit in budget_bytes; refuses a pool that cannot hold one full context."""
    per_block = bytes_per_block(cfg, block_size, dtype_name)
    n = budget_bytes // per_block
    need = -(-max_model_len // block_size)
    if budget_bytes < per_block * 16:
        raise OutOfMemoryError(
            f"no GPU memory is left for the KV cache after the weights and activations "
            f"({budget_bytes / 2**30:.2f} GiB left under --gpu-memory-utilization); raise "
            f"--gpu-memory-utilization, lower --max-num-batched-tokens, or use a smaller model"
        )
    if n < need:
        fits = int(n * block_size)
        raise OutOfMemoryError(
            f"the KV cache for a {max_model_len}-token context needs {need * per_block / 2**30:.2f} GiB "
            f"({dtype_name}) but only {budget_bytes / 2**30:.2f} GiB is free after the weights; "
            f"the largest context that fits is {fits} tokens (use --max-model-len {fits // 16 * 16}"
            f"{', or --kv-dtype int8' if dtype_name not in QUANTIZED else ''})"
        )
    return int(n)


# ---- pool sizing: the one place that decides how many blocks the pool has ------------------
CPU_KV_BUDGET = 2 << 30  # bytes of KV pool on the CPU reference path
GPU_SLACK = 256 << 20  # bytes kept back on a GPU for CUDA graphs, the sampler, allocator slack

# forward(kv, n_tokens, n_blocks): one dummy forward of n_tokens over a scratch pool
ProfileForward = Callable[[KVCache, int, int], None]


class KVPoolPlanner:
    """Chooses the KV dtype (at start, before the weights load) and then the pool size."""

    def __init__(self, cfg: EngineConfig, model_cfg: ModelConfig, device: torch.device) -> None:
        self.cfg, self.model_cfg, self.device = cfg, model_cfg, device
        self.block_size = cfg.block_size
        self.dtype_name = resolve_kv_dtype(cfg.kv_dtype, device)
        self.bytes_per_block = bytes_per_block(model_cfg, self.block_size, self.dtype_name)

    def allocate(self, max_model_len: int, forward: ProfileForward) -> tuple[KVCache, int]:
        """(the pool, the context length it serves): measured free memory on a GPU (after one
        forward of max_num_batched_tokens), CPU_KV_BUDGET on the CPU, or --num-kv-blocks."""
        cfg, bs = self.cfg, self.block_size
        if cfg.num_kv_blocks is not None:
            n = cfg.num_kv_blocks
        elif self.device.type != "cuda":
            n, max_model_len = self._plan(CPU_KV_BUDGET, max_model_len)
            n = min(cdiv(max_model_len, bs) * cfg.max_num_seqs, n)
        else:
            n, max_model_len = self._plan(self._gpu_budget(max_model_len, forward), max_model_len)
        return self._pool(n), max_model_len

    def _pool(self, num_blocks: int) -> KVCache:
        mc, bs = self.model_cfg, self.block_size
        return allocate_kv_cache(mc, num_blocks, bs, self.dtype_name, self.device)

    def _gpu_budget(self, max_model_len: int, forward: ProfileForward) -> int:
        peak = self._profile_peak(min(self.cfg.max_num_batched_tokens, max_model_len), forward)
        free, total = torch.cuda.mem_get_info(self.device)
        used_elsewhere = total - free - torch.cuda.memory_reserved(self.device)
        budget = int(total * self.cfg.gpu_memory_utilization) - peak - used_elsewhere
        return budget - GPU_SLACK

    def _profile_peak(self, n_tokens: int, forward: ProfileForward) -> int:
        """Peak bytes torch allocates for weights + one forward of n_tokens (scratch pool not
        counted)."""
        n_blocks = cdiv(n_tokens, self.block_size) + 1
        kv = self._pool(n_blocks)
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        forward(kv, n_tokens, n_blocks)
        torch.cuda.synchronize(self.device)
        peak = torch.cuda.max_memory_allocated(self.device) - n_blocks * self.bytes_per_block
        del kv
        torch.cuda.empty_cache()
        return peak

    def _plan(self, budget: int, max_model_len: int) -> tuple[int, int]:
        """(blocks that fit in budget, context length). A context the user asked for that does
        not fit is refused (with the largest that would); the model's own default context
        shrinks to fit instead."""
        bs, per_block = self.block_size, self.bytes_per_block
        try:
            n = plan_num_blocks(self.model_cfg, bs, self.dtype_name, budget, max_model_len)
            return n, max_model_len
        except OutOfMemoryError:
            fits = budget // per_block * bs
            if self.cfg.max_model_len is not None or fits < min(2048, max_model_len):
                raise
        log.warning(
            "the model's %d-token context does not fit in the KV pool; using %d tokens "
            "(set --max-model-len or --kv-dtype int8)",
            max_model_len,
            fits,
        )
        return int(budget // per_block), int(fits)
