"""The one table of KV-cache storage dtypes, and the KV quantization rules every backend
shares.

Quantization is per token and per head: s = absmax / QMAX, stored value = x / s (rounded to
nearest for int8, cast to e4m3 for fp8); an all-zero row gets s = 0 and stores zeros. A
quantized cache keeps fp32 scales [num_blocks, n_kv_heads, block_size] beside its pages.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class KVDtype:
    name: str  # the --kv-dtype value
    dtype: torch.dtype  # storage dtype of the pages
    qmax: float | None = None  # largest stored magnitude of a quantized dtype; None: float
    min_capability: tuple[int, int] | None = None  # CUDA compute capability it needs
    needs: str = ""  # the GPUs that have it, for the error message

    @property
    def quantized(self) -> bool:
        return self.qmax is not None


KV_DTYPES: dict[str, KVDtype] = {
    "fp32": KVDtype("fp32", torch.float32),
    "fp16": KVDtype("fp16", torch.float16),
    "bf16": KVDtype("bf16", torch.bfloat16),
    "int8": KVDtype("int8", torch.int8, qmax=127.0),
    "fp8": KVDtype("fp8", torch.float8_e4m3fn, 448.0, (8, 9), "an Ada or newer GPU"),
}
_BY_TORCH: dict[torch.dtype, KVDtype] = {k.dtype: k for k in KV_DTYPES.values()}


def kv_dtype_of(dtype: torch.dtype) -> KVDtype | None:
    """The table entry of a cache tensor's dtype (None: not a KV storage dtype)."""
    return _BY_TORCH.get(dtype)


def is_quantized(dtype: torch.dtype) -> bool:
    kd = _BY_TORCH.get(dtype)
    return kd is not None and kd.quantized


def kv_qmax(dtype: torch.dtype) -> float:
    """QMAX of a quantized cache dtype; 0.0 for a float cache (the kernels' QMAX constexpr)."""
    kd = _BY_TORCH.get(dtype)
    return kd.qmax if kd is not None and kd.qmax is not None else 0.0


def quantize_kv(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., D] float -> (values [..., D] in dtype, scales [...] fp32) for int8 / fp8 caches."""
    qmax = kv_qmax(dtype)
    if not qmax:
        raise KeyError(dtype)
    xf = x.float()
    absmax = xf.abs().amax(dim=-1)  # [...]
    scale = absmax / qmax
    y = torch.where(scale[..., None] > 0, xf / scale[..., None], torch.zeros_like(xf))
    y = y.round() if dtype == torch.int8 else y
    return y.clamp(-qmax, qmax).to(dtype), scale


def dequantize_kv(values: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """values [..., D] (any cache dtype), scale [...] or None -> fp32 [..., D]."""
    out = values.float()
    return out if scale is None else out * scale[..., None]
