"""AutoAWQ's GEMM packing of 4-bit weights (checkpoints with `quant_method: awq`,
`version: gemm`), round-to-nearest quantization into it, and its reference dequantization.

Layout, from AutoAWQ `awq/modules/linear/gemm.py` (`WQLinear_GEMM.from_linear`) and
`awq/utils/packing_utils.py` (`unpack_awq`, `reverse_awq_order`, `dequantize_gemm`):
  qweight int32 [K, N / 8]: the quants of W^T [K, N], eight per word along N; nibble i
                            (bits 4i..4i+3) of word c holds column 8 c + AWQ_ORDER[i]
  qzeros  int32 [K / group, N / 8]: the zero points, packed the same way
  scales  fp16  [K / group, N]
  W^T[k, n] = (q[k, n] - z[k // group, n]) * s[k // group, n]   (fp16 arithmetic)
Quantization (AutoAWQ's `pseudo_quantize_tensor` with zero_point): per group of `group`
inputs of an output row, s = (max - min) / 15, z = clamp(-round(min / s), 0, 15),
q = clamp(round(w / s) + z, 0, 15), over a range clipped as `quantize` says.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble i of a word holds column 8 c + AWQ_ORDER[i]
BITS = 4
PACK = 32 // BITS  # values per int32
_SHIFTS = torch.arange(0, 32, BITS, dtype=torch.int32)  # [8]


def pack(v: torch.Tensor) -> torch.Tensor:
    """4-bit values [R, C] (0..15, C % 8 == 0) -> int32 [R, C / 8] in AutoAWQ's order."""
    r, c = v.shape
    cols = v.to(torch.int32).reshape(r, c // PACK, PACK)[..., list(AWQ_ORDER)]  # nibble order
    return (cols << _SHIFTS.to(v.device)).sum(dim=-1, dtype=torch.int32)


def unpack(words: torch.Tensor) -> torch.Tensor:
    """int32 [R, C / 8] -> 4-bit values uint8 [R, C] in column order (inverse of `pack`)."""
    r, c8 = words.shape
    nib = (words[..., None] >> _SHIFTS.to(words.device)) & 15  # [R, C/8, 8] in nibble order
    out = torch.empty_like(nib)
    out[..., list(AWQ_ORDER)] = nib  # nibble i -> column AWQ_ORDER[i]
    return out.reshape(r, c8 * PACK).to(torch.uint8)


CLIP_RATIOS = (1.0, 0.95, 0.9, 0.85, 0.8, 0.75)  # of each group's range, tried by `quantize`


def _rtn(g: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Scales (fp16), zeros and quants of groups g [N, G, group] for the range [lo, hi]."""
    s = ((hi - lo).clamp(min=1e-5) / 15).to(torch.float16)
    sf = s.float()
    z = (-torch.round(lo / sf)).clamp(0, 15)
    q = (torch.round(g / sf[..., None]) + z[..., None]).clamp(0, 15)
    return s, z, q


def quantize(w: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """4-bit with zero points of a weight w [N, K] (torch layout), round to nearest under the
    scale and zero point of each group; of the ranges `CLIP_RATIOS` x (min, max) the one with
    the least squared error is kept (a weight-only form of AutoAWQ's clip search) ->
    (qweight int32 [K, N/8], qzeros int32 [K/group, N/8], scales fp16 [K/group, N])."""
    n, k = w.shape
    if k % group or n % PACK:
        raise ValueError(f"AWQ: weight [{n}, {k}] does not fit group {group} / 8-column packing")
    g = w.float().reshape(n, k // group, group)
    lo, hi = g.amin(dim=-1), g.amax(dim=-1)  # [N, G]
    best: tuple[torch.Tensor, ...] | None = None
    best_err = torch.full_like(lo, float("inf"))
    for r in CLIP_RATIOS:
        s, z, q = _rtn(g, lo * r, hi * r)
        err = ((q - z[..., None]) * s.float()[..., None] - g).square().sum(dim=-1)  # [N, G]
        if best is None:
            best, best_err = (s, z, q), err
            continue
        take = err < best_err
        best = tuple(torch.where(take[..., None] if b.dim() == 3 else take, new, b)
                     for b, new in zip(best, (s, z, q)))  # fmt: skip
        best_err = torch.minimum(err, best_err)
    s, z, q = best  # type: ignore[misc]
    qweight = pack(q.reshape(n, k).t().to(torch.uint8))
    qzeros = pack(z.t().to(torch.uint8))
    return qweight, qzeros, s.t().contiguous()


def dequantize(
    qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, group: int
) -> torch.Tensor:
    """The reference: W [N, K] fp16 = (q - z) * s, as AutoAWQ's `dequantize_gemm` computes
    W^T in fp16 (an fp16 product of small integers and fp16 scales is its exact product
    rounded once, so fp32 math rounded to fp16 is the same)."""
    q = unpack(qweight).to(torch.float32)  # [K, N]
    z = unpack(qzeros).to(torch.float32).repeat_interleave(group, dim=0)  # [K, N]
    s = scales.to(torch.float32).repeat_interleave(group, dim=0)
    return ((q - z) * s).to(torch.float16).t()


@dataclass(frozen=True)
class AWQTensor:
    """One AWQ linear weight of a checkpoint: W [N, K] as its three memory-mapped parts."""

    name: str
    shape: tuple[int, int]  # (N, K), torch order
    qweight: torch.Tensor  # int32 [K, N / 8]
    qzeros: torch.Tensor  # int32 [K / group, N / 8]
    scales: torch.Tensor  # fp16 [K / group, N]
    group: int

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.qweight, self.qzeros, self.scales))
