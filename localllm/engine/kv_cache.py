"""The paged KV pool: dtype choice, per-block size, allocation from a memory budget."""

from __future__ import annotations

import torch

from localllm.config import ModelConfig
from localllm.errors import LocalLLMError, OutOfMemoryError
from localllm.model.batch import KVCache

_STORAGE = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "int8": torch.int8,
    "fp8": torch.float8_e4m3fn,
}
QUANTIZED = ("int8", "fp8")


def resolve_kv_dtype(name: str, device: torch.device) -> str:
    """Validate --kv-dtype for this device; "auto" = fp16 on CUDA, fp32 on CPU."""
    if name == "auto":
        return "fp16" if device.type == "cuda" else "fp32"
    if name == "fp8" and device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) < (8, 9):
            gpu = torch.cuda.get_device_name(device)
            raise LocalLLMError(
                f"--kv-dtype fp8 needs an Ada or newer GPU (compute capability 8.9+); {gpu} is "
                f"{major}.{minor}. Use --kv-dtype int8 for the same memory saving."
            )
    return name


def bytes_per_block(cfg: ModelConfig, block_size: int, dtype_name: str) -> int:
    """Bytes one block takes across all layers (K and V, plus scales when quantized)."""
    elem = torch.empty((), dtype=_STORAGE[dtype_name]).element_size()
    per_layer = 2 * cfg.n_kv_heads * block_size * cfg.head_dim * elem
    if dtype_name in QUANTIZED:
        per_layer += 2 * cfg.n_kv_heads * block_size * 4
    return per_layer * cfg.n_layers


def allocate_kv_cache(
    cfg: ModelConfig, num_blocks: int, block_size: int, dtype_name: str, device: torch.device
) -> KVCache:
    L, H, D = cfg.n_layers, cfg.n_kv_heads, cfg.head_dim
    dtype = _STORAGE[dtype_name]
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
