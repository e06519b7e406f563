"""Activations quantized to int8 for the dp4a GEMV (`linear/dp4a_triton.py`): torch reference.

Each run of 32 elements of a row (a *group*) gets one scale dx = max|x| / 127 and int8
values q = floor(x / dx + 0.5), stored in the byte order of the packed weight words it will
meet (`quant/planes.py`), so one int32 of activations lines up with the four fields of a weight
word that one `dp4a` multiplies:
  "w4" (4-bit formats, `_words4`): byte 16 t + 4 w + j of a group = element 8 j + 4 t + w
        (word w's low nibbles are t = 0, its high nibbles t = 1)
  "w8" (q8_0, `_words8`):          byte 16 h + 4 w + s of a group = element 16 h + 4 s + w
Per group, four fp32: dx, and dx * sum(q) over the group, over its elements 0..15 and over
16..31 (formats with a zero point or an offset subtract those).
  xq int8 [T, K]    xs fp32 [T, K / 32, 4]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from localllm.kernels.quant import KERNEL_FORMATS, kernel_facts

GROUP = 32
LAYOUTS = ("w4", "w8")
QUANT_CODES = {None: 0, "w4": 1, "w8": 2}  # QUANT constexpr of the kernels that emit a layout


@dataclass
class QAct:
    """A GEMV input: activations x [T, K] and their int8 forms by layout, either emitted by the
    kernel that produced x (fused RMSNorm / SiLU x mul) or quantized on first use. The model
    passes one only when int8 activations are enabled; a GEMM (T > 1) just uses x."""

    x: torch.Tensor
    q: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)

    @property
    def shape(self) -> torch.Size:
        return self.x.shape


def plain(x: torch.Tensor | QAct) -> torch.Tensor:
    return x.x if isinstance(x, QAct) else x


# weight format -> the byte order of the activations its dp4a GEMV reads (`KernelFacts`)
ACT_LAYOUT: dict[str, str] = {name: kernel_facts(name).act_layout for name in KERNEL_FORMATS}


def int8_layout(fmts: list[str]) -> str | None:
    """The one int8 layout that serves every weight reading an input, or None (then the input
    stays in float for weights without a dp4a kernel, and is quantized per layout on use)."""
    layouts = {ACT_LAYOUT.get(f) for f in fmts}
    return layouts.pop() if len(layouts) == 1 else None


def element_of_byte(layout: str) -> torch.Tensor:
    """int64 [32]: the element of a group stored at each byte position."""
    p = torch.arange(GROUP)
    hi, w, lo = p // 16, (p // 4) % 4, p % 4
    if layout == "w4":
        return 8 * lo + 4 * hi + w
    if layout == "w8":
        return 16 * hi + 4 * lo + w
    raise ValueError(f"quant_act: unknown layout {layout!r}")


def quant_act_ref(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, K] (K a multiple of 32) -> (xq int8 [T, K], xs fp32 [T, K / 32, 4])."""
    t, k = x.shape
    if k % GROUP:
        raise ValueError(f"quant_act: K={k} is not a multiple of {GROUP}")
    e = element_of_byte(layout).to(x.device)
    xg = x.float().reshape(t, k // GROUP, GROUP)[:, :, e]  # [T, G, 32] in byte order
    amax = xg.abs().amax(dim=-1, keepdim=True)  # [T, G, 1]
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    q = torch.floor(xg * inv + 0.5).clamp(-127, 127)
    dx = amax / 127.0
    first = (e < 16).to(x.device)
    s_all = q.sum(-1, keepdim=True)
    s_lo = (q * first).sum(-1, keepdim=True)
    xs = torch.cat([dx, dx * s_all, dx * s_lo, dx * (s_all - s_lo)], dim=-1)  # [T, G, 4]
    return q.to(torch.int8).reshape(t, k), xs


def dequant_act(xq: torch.Tensor, xs: torch.Tensor, layout: str) -> torch.Tensor:
    """(xq, xs) -> fp32 [T, K] in element order (what the dp4a GEMV multiplies)."""
    t, k = xq.shape
    e = element_of_byte(layout).to(xq.device)
    v = xq.float().reshape(t, k // GROUP, GROUP) * xs[:, :, :1]  # byte order
    out = torch.empty_like(v)
    out[:, :, e] = v
    return out.reshape(t, k)
