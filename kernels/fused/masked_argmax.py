"""Grammar masks on logits rows, then their greedy token: the torch reference.

Guided decoding hands the device one packed bitmask row per constrained logits row (bit
`i & 31` of word `i >> 5` set when token i is allowed; llguidance's layout). This op sets the
disallowed logits of those rows to -inf in place (a sampler or logprobs then see the masked
distribution) and writes each row's argmax over what is left into `out` at the row's index,
so a greedy constrained row needs no logits on the host. Columns past the 32 * W bits of a
mask row (a padded embedding) are disallowed; bits past the V columns are ignored.
"""

from __future__ import annotations

import torch


def check_masked_argmax(
    logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor, out: torch.Tensor
) -> None:
    """Shapes, dtypes and devices shared by the reference and the Triton version."""
    if logits.dim() != 2 or not logits.is_floating_point():
        raise ValueError(f"masked_argmax: logits must be float [S, V], got {tuple(logits.shape)}")
    if bitmask.dim() != 2 or bitmask.dtype != torch.int32:
        raise ValueError("masked_argmax: bitmask must be int32 [R, W]")
    if rows.dim() != 1 or rows.dtype != torch.int64 or rows.shape[0] != bitmask.shape[0]:
        raise ValueError(f"masked_argmax: rows must be int64 [{bitmask.shape[0]}]")
    if out.dim() != 1 or out.dtype != torch.int64 or out.shape[0] < logits.shape[0]:
        raise ValueError(f"masked_argmax: out must be int64 [>= {logits.shape[0]}]")
    devices = {t.device for t in (logits, bitmask, rows, out)}
    if len(devices) != 1:
        raise ValueError(f"masked_argmax: tensors on several devices {sorted(map(str, devices))}")


def unpack_bitmask(bitmask: torch.Tensor, width: int) -> torch.Tensor:
    """[R, W] int32 -> [R, width] bool, True = allowed; columns past 32*W are False."""
    shifts = torch.arange(32, device=bitmask.device, dtype=torch.int32)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1  # [R, W, 32]
    allowed = bits.view(bitmask.shape[0], -1).bool()  # [R, 32*W]
    if allowed.shape[1] >= width:
        return allowed[:, :width]
    pad = allowed.new_zeros(allowed.shape[0], width - allowed.shape[1])
    return torch.cat([allowed, pad], dim=1)


def masked_argmax_ref(
    logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor, out: torch.Tensor
) -> None:
    """In place. logits [S, V] float; bitmask [R, W] int32, row k the mask of logits row
    rows[k]; rows [R] int64, distinct; out [>= S] int64. Logits rows not named and the
    other entries of out are not touched. Ties: the first index of the maximum."""
    check_masked_argmax(logits, bitmask, rows, out)
    if rows.shape[0] == 0:
        return
    allowed = unpack_bitmask(bitmask, logits.shape[1])  # [R, V]
    picked = logits.index_select(0, rows).masked_fill_(~allowed, float("-inf"))  # [R, V]
    logits.index_copy_(0, rows, picked)
    out.index_copy_(0, rows, picked.argmax(dim=-1))
