"""The signature of every op, once: each backend's implementation must match these (mypy
checks the `OpSet` each backend builds in `registry.py`, and every call site through `Ops`).
Shapes: the torch references (`fused/`, `linear/qlinear.py`, `attention/paged.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from localllm.kernels.fused.qkv_rope import Heads
from localllm.kernels.fused.quant_act import QAct
from localllm.kernels.linear.qlinear import QuantWeight


class RmsNorm(Protocol):
    def __call__(self, x: torch.Tensor, weight: torch.Tensor, eps: float,
                 quant: str | None = None) -> torch.Tensor | QAct: ...  # fmt: skip


class AddRmsNorm(Protocol):
    def __call__(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                 quant: str | None = None) -> tuple[torch.Tensor | QAct, torch.Tensor]: ...  # fmt: skip


class SiluMul(Protocol):
    def __call__(self, gate: torch.Tensor, up: torch.Tensor,
                 quant: str | None = None) -> torch.Tensor | QAct: ...  # fmt: skip


class RopeStoreKV(Protocol):
    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                 cos_sin: torch.Tensor, interleaved: bool, k_cache: torch.Tensor,
                 v_cache: torch.Tensor, k_scale: torch.Tensor | None, v_scale: torch.Tensor | None,
                 slot_mapping: torch.Tensor) -> None: ...  # fmt: skip


class PagedAttention(Protocol):
    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 k_scale: torch.Tensor | None, v_scale: torch.Tensor | None,
                 block_tables: torch.Tensor, cu_seqlens_q: torch.Tensor, seq_lens: torch.Tensor,
                 max_q_len: int, max_seq_len: int, scale: float, out: torch.Tensor | None = None,
                 quant: str | None = None,
                 long_context: bool = False) -> torch.Tensor | QAct: ...  # fmt: skip


class QLinear(Protocol):
    def __call__(self, x: torch.Tensor | QAct, w: QuantWeight, bias: torch.Tensor | None = None,
                 out_dtype: torch.dtype | None = None) -> torch.Tensor: ...  # fmt: skip


class QkvRopeStore(Protocol):
    def __call__(self, x: torch.Tensor | QAct, ws: list[QuantWeight], bias: torch.Tensor | None,
                 heads: Heads, positions: torch.Tensor, cos_sin: torch.Tensor,
                 k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: torch.Tensor | None,
                 v_scale: torch.Tensor | None, slot_mapping: torch.Tensor) -> torch.Tensor: ...  # fmt: skip


class Argmax(Protocol):
    def __call__(self, logits: torch.Tensor) -> torch.Tensor: ...


class MaskedArgmax(Protocol):
    def __call__(self, logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor,
                 out: torch.Tensor) -> None: ...  # fmt: skip


class CopySlots(Protocol):
    def __call__(self, pool: torch.Tensor, src: int, dst: int, num_tokens: int) -> None: ...


class QuantAct(Protocol):
    def __call__(self, x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass(frozen=True)
class OpSet:
    """One backend's ops (every op of the model's forward)."""

    rms_norm: RmsNorm
    add_rms_norm: AddRmsNorm
    silu_mul: SiluMul
    rope_store_kv: RopeStoreKV
    paged_attention: PagedAttention
    qlinear: QLinear
    qkv_rope_store: QkvRopeStore
    argmax: Argmax
    masked_argmax: MaskedArgmax
    quant_act: QuantAct
    copy_slots: CopySlots
