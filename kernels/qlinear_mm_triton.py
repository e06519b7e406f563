"""Triton fused dequant x GEMM for 2..MM_MAX_T activation rows (batched decode, speculative
verify, short prefill chunks).

Each program owns BN weight rows and BM activation rows and walks K in steps of NG scale
groups of 32 elements. A step dequantizes the weight tile `[BN, NG * 32]` in registers: each
packed word is loaded once and its 8 fields are decoded, scaled and joined in the registers
of the thread that loaded it (`localllm.kernels.qlinear_pack`: element 4 s + w of a
32-element group is field s of word w), so the tile is in a permuted K order, and Triton
lowers the joined tile directly into the MMA operand. The activation tile is loaded
contiguously and permuted the same way in registers (a dot product does not care about the
order of K). Scales are loaded once per group. One `tl.dot` per step multiplies the two on the
tensor cores, so every weight byte is read from memory once per BM rows. The loads of step
i + 1 are issued before step i computes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from localllm.kernels.qlinear_core_triton import _write_out

SUPER_BLOCK = ("q4_k", "q5_k", "q6_k")  # K is a multiple of 256
FMT_CODES: dict[str, int] = {"q8_0": 0, "q4_0": 1, "q4_k": 2, "q5_k": 3, "q6_k": 4}
PLANES: dict[str, tuple[str, ...]] = {
    "q8_0": ("qs", "d"),
    "q4_0": ("qs", "d"),
    "q4_k": ("qs", "sm", "d", "dmin"),
    "q5_k": ("qs", "sm", "d", "dmin", "qh"),
    "q6_k": ("ql", "qh", "sc", "d"),
}


@triton.jit
def _join8(f0, f1, f2, f3, f4, f5, f6, f7):
    """Eight [..] -> [.., 2, 2, 2], all in the registers of the thread holding [..]: position
    4 a + 2 b + c of the new dims holds f_(4 c + 2 b + a) (field index bit-reversed)."""
    return tl.join(tl.join(tl.join(f0, f1), tl.join(f2, f3)),
                   tl.join(tl.join(f4, f5), tl.join(f6, f7)))  # fmt: skip


@triton.jit
def _nib(wd, S: tl.constexpr, hi, HB: tl.constexpr):
    """Field S of int32 words: the nibble, plus HB high bits from `hi` (bits HB S ..)."""
    u = (wd >> (4 * S)) & 15
    if HB > 0:
        u = u | (((hi >> (HB * S)) & ((1 << HB) - 1)) << 4)
    return u


@triton.jit
def _affine(u, scale, shift, DT: tl.constexpr):
    return (u.to(tl.float32) * scale - shift).to(DT)


@triton.jit
def _plane_ptrs(FMT: tl.constexpr, p0, p1, p2, p3, p4, rows, g, G):
    """Pointers of the first K step (groups g [NG]) into every plane of rows [BN] (int64):
    (words [BN, NG, 4 | 8], high bits [BN, NG, 4], per-group scale pairs as int16 [BN, NG],
    per-super-block d and dmin [BN, NG]); unused entries repeat another pointer. The K loop
    then only advances them."""
    r2 = rows[:, None]
    g2 = g[None, :]
    o4 = (r2 * (G * 4) + g2 * 4)[:, :, None] + tl.arange(0, 4)[None, None, :]  # 4 per group
    o1 = r2 * G + g2  # one entry (or int16 pair) per group
    osb = r2 * (G // 8) + g2 // 8  # one entry per 256-element super-block
    if FMT == 0:  # q8_0: qs int32 [N, 8G], d fp16 [N, G]
        wp = p0 + (r2 * (G * 8) + g2 * 8)[:, :, None] + tl.arange(0, 8)[None, None, :]
        sp = p1 + o1
        hp, dp, mp = wp, sp, sp
    elif FMT == 1:  # q4_0: qs int32 [N, 4G], d fp16 [N, G] in reverse group order
        wp = p0 + o4
        sp = p1 + r2 * G + (G - 1 - g2)
        hp, dp, mp = wp, sp, sp
    elif FMT == 2 or FMT == 3:  # q4_k/q5_k: sm (scale, min) bytes [N, 2G], d/dmin [N, G/8]
        wp = p0 + o4
        sp = p1.to(tl.pointer_type(tl.int16)) + o1
        dp = p2 + osb
        mp = p3 + osb
        hp = p4 + o4 if FMT == 3 else wp  # q5_k: qh uint8 [N, 4G]
    else:  # q6_k: ql int32 [N, 4G], qh int16 [N, 4G], sc int8 pairs [N, 2G], d [N, G/8]
        wp = p0 + o4
        hp = p1 + o4
        sp = p2.to(tl.pointer_type(tl.int16)) + o1
        dp = p3 + osb
        mp = dp
    return wp, hp, sp, dp, mp


@triton.jit
def _load_raw(FMT: tl.constexpr, wp, hp, sp, dp, mp):
    """The packed planes of one K step."""
    wd = tl.load(wp)  # [BN, NG, 4 | 8] int32
    s = tl.load(sp)  # [BN, NG]
    if FMT == 3 or FMT == 4:
        hi = tl.load(hp).to(tl.int32)
    else:
        hi = wd
    if FMT >= 2:
        d = tl.load(dp)
    else:
        d = s
    if FMT == 2 or FMT == 3:
        m = tl.load(mp)
    else:
        m = d
    return wd, hi, s, d, m


@triton.jit
def _deq_tile(FMT: tl.constexpr, wd, hi, s, d, m, DT: tl.constexpr):
    """Weights [BN, NG * 32] (dtype DT) of one K step (`_load_raw`) in the permuted K order of
    `_x_tile`: every word's fields are decoded and joined in the registers of the thread that
    loaded it."""
    BN: tl.constexpr = wd.shape[0]
    NG: tl.constexpr = wd.shape[1]
    if FMT == 0:  # q8_0: byte s of word 4 h + w is element 16 h + 4 s + w
        d = d.to(tl.float32)[:, :, None]  # [BN, NG, 1]
        b0 = (((wd << 24) >> 24).to(tl.float32) * d).to(DT)
        b1 = (((wd << 16) >> 24).to(tl.float32) * d).to(DT)
        b2 = (((wd << 8) >> 24).to(tl.float32) * d).to(DT)
        b3 = ((wd >> 24).to(tl.float32) * d).to(DT)
        w = tl.join(tl.join(b0, b1), tl.join(b2, b3))  # [BN, NG, 8, 2, 2]
    else:
        if FMT == 1:  # q4_0: (u - 8) d
            d = d.to(tl.float32)[:, :, None]
            sc0 = d
            mn0 = 8.0 * d
            sc1 = sc0
            mn1 = mn0
            HB: tl.constexpr = 0
        elif FMT == 2 or FMT == 3:  # q4_k / q5_k: u d sc - dmin m
            sm = s.to(tl.int32)  # [BN, NG]: scale | min << 8
            dd = d.to(tl.float32)
            dm = m.to(tl.float32)
            sc0 = (dd * (sm & 255).to(tl.float32))[:, :, None]
            mn0 = (dm * ((sm >> 8) & 255).to(tl.float32))[:, :, None]
            sc1 = sc0
            mn1 = mn0
            if FMT == 3:  # bit s of qh byte w = 5th bit of field s
                HB: tl.constexpr = 1
            else:
                HB: tl.constexpr = 0
        else:  # q6_k: (u - 32) d sc, sc per 16 elements (fields 0-3 | 4-7)
            HB: tl.constexpr = 2
            sc = s.to(tl.int32)  # [BN, NG]: two int8
            dd = d.to(tl.float32)
            sc0 = (dd * ((sc << 24) >> 24).to(tl.float32))[:, :, None]
            sc1 = (dd * (sc >> 8).to(tl.float32))[:, :, None]
            mn0 = 32.0 * sc0
            mn1 = 32.0 * sc1
        w = _join8(
            _affine(_nib(wd, 0, hi, HB), sc0, mn0, DT), _affine(_nib(wd, 1, hi, HB), sc0, mn0, DT),
            _affine(_nib(wd, 2, hi, HB), sc0, mn0, DT), _affine(_nib(wd, 3, hi, HB), sc0, mn0, DT),
            _affine(_nib(wd, 4, hi, HB), sc1, mn1, DT), _affine(_nib(wd, 5, hi, HB), sc1, mn1, DT),
            _affine(_nib(wd, 6, hi, HB), sc1, mn1, DT), _affine(_nib(wd, 7, hi, HB), sc1, mn1, DT),
        )  # [BN, NG, 4, 2, 2, 2]  # fmt: skip
    return tl.reshape(w, [BN, NG * 32])


@triton.jit
def _x_tile(FMT: tl.constexpr, x, NG: tl.constexpr):
    """Activations [BM, NG * 32] of groups [g0, g0 + NG) in `_deq_tile`'s element order:
    loaded contiguously, then permuted in registers. 4-bit formats: position
    (w, a, b, c) holds element 4 (4 c + 2 b + a) + w; Q8_0: (h, w, a, b) holds 16 h + 4 (2 b + a) + w."""
    bm: tl.constexpr = x.shape[0]
    if FMT == 0:  # [BM, NG, h, s1, s0, w] -> [BM, NG, h, w, s0, s1]
        x = tl.permute(tl.reshape(x, [bm, NG, 2, 2, 2, 4]), (0, 1, 2, 5, 4, 3))
    else:  # [BM, NG, s2, s1, s0, w] -> [BM, NG, w, s0, s1, s2]
        x = tl.permute(tl.reshape(x, [bm, NG, 2, 2, 2, 4]), (0, 1, 5, 4, 3, 2))
    return tl.reshape(x, [bm, NG * 32])


@triton.jit
def _qmm_kernel(
    x_ptr, out_ptr, bias_ptr, p0, p1, p2, p3, p4,
    T, N, G, stride_xm, stride_om, groups_per_split,
    FMT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, NG: tl.constexpr,
    HAS_BIAS: tl.constexpr, ATOMIC: tl.constexpr, PREC: tl.constexpr, SWAP: tl.constexpr,
):  # fmt: skip
    """out [T, N] (+)= x [T, K] @ W^T (+ bias), K = 32 G; program (n, m, s) owns weight rows
    [n BN, n BN + BN), x rows [m BM, m BM + BM) and 32-element groups
    [s groups_per_split, (s + 1) groups_per_split) (NG divides both G and groups_per_split)."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BN + tl.arange(0, BN)  # [BN]
    mask_n = offs_n < N
    rows = (offs_n % N).to(tl.int64)  # clamped rows: weight loads need no mask
    offs_m = pid_m * BM + tl.arange(0, BM)  # [BM]
    mask_m = offs_m < T
    xrow = x_ptr + offs_m.to(tl.int64)[:, None] * stride_xm  # [BM, 1]
    g_lo = pid_k * groups_per_split
    g_hi = tl.minimum(g_lo + groups_per_split, G)
    if SWAP:  # weights as the MMA's A operand (M = weight rows), x^T as B
        acc = tl.zeros([BN, BM], dtype=tl.float32)
    else:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
    g = g_lo + tl.arange(0, NG)  # [NG]
    wp, hp, sp, dp, mp = _plane_ptrs(FMT, p0, p1, p2, p3, p4, rows, g, G)
    xp = xrow + (g_lo * 32 + tl.arange(0, NG * 32))[None, :]  # [BM, NG * 32]
    WPG: tl.constexpr = 8 if FMT == 0 else 4  # int32 words per group
    SSTEP: tl.constexpr = -NG if FMT == 1 else NG  # q4_0 scales run backwards
    n_steps = tl.cdiv(g_hi - g_lo, NG)  # the host makes NG divide groups_per_split and G
    # software pipelining by hand: step i + 1's loads are in flight while step i computes
    # (the last step re-reads its own planes instead of running past the end)
    xr = tl.load(xp, mask=mask_m[:, None], other=0.0)  # [BM, NG * 32] K order
    wd, hi, s, d, m = _load_raw(FMT, wp, hp, sp, dp, mp)
    for i in range(n_steps):
        nx = (i + 1 < n_steps).to(tl.int32)  # 0 on the last step
        xp += NG * 32 * nx
        wp += NG * WPG * nx
        hp += NG * 4 * nx
        sp += SSTEP * nx
        dp += NG // 8 * nx
        mp += NG // 8 * nx
        nxr = tl.load(xp, mask=mask_m[:, None], other=0.0)
        nwd, nhi, ns, nd, nm = _load_raw(FMT, wp, hp, sp, dp, mp)
        x = _x_tile(FMT, xr, NG)  # [BM, NG * 32], permuted K order
        wt = _deq_tile(FMT, wd, hi, s, d, m, x.dtype)  # [BN, NG * 32], same order
        if SWAP:
            acc = tl.dot(wt, tl.trans(x), acc, input_precision=PREC)  # [BN, BM]
        else:
            acc = tl.dot(x, tl.trans(wt), acc, input_precision=PREC)  # [BM, BN]
        xr, wd, hi, s, d, m = nxr, nwd, nhi, ns, nd, nm
    if SWAP:
        acc = tl.trans(acc)  # [BM, BN]
    optrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :]
    omask = mask_m[:, None] & mask_n[None, :]
    _write_out(acc, optrs, omask, bias_ptr, offs_n, mask_n, pid_k, HAS_BIAS, ATOMIC)


@dataclass(frozen=True)
class MMConfig:
    bm: int  # activation rows per program (>= 16, a power of 2)
    bn: int  # weight rows per program
    ng: int  # 32-element groups per K step
    split: int = 1  # programs along K (fp32 atomics when > 1)
    warps: int = 4
    stages: int = 2
    swap: bool = False  # weights as the A operand of the MMA (out^T = W x^T)


def _largest_ng(ng: int, groups: int) -> int:
    """The largest power of 2 <= ng dividing the group count (K = 32 * groups)."""
    while groups % ng:
        ng //= 2
    return ng


# up to this many activation rows the fused kernel beats dequantize + cuBLAS: it reads the
# packed weights once instead of writing and re-reading an fp16 copy (H200, CUDA-graph timing,
# 4096x4096 Q4_K: 50.5 -> 20.9 us at 8 rows, 51.1 -> 30.7 us at 32). With 128-row blocks a
# 100-token cached-prefix turn took 2x longer than dequantize + cuBLAS, so more rows stay there.
MM_MAX_T = 64


def mm_config(fmt: str, n: int, k: int, t: int, num_sms: int) -> MMConfig:
    """Heuristic from the H200 sweep (scripts/sweep_qmm.py, CUDA-graph timing): one M block
    covers the rows up to 64 (every weight tile is decoded once), 128-row blocks above; 128
    weight rows per program as the MMA's A operand (swap: 1.1-1.3x faster, and Triton 3.6
    fails to compile the unswapped form for 64+ rows), 256 K elements per step, 8 warps; split
    K until every SM has two programs."""
    groups = k // 32
    bm = max(16, triton.next_power_of_2(t)) if t <= 64 else 128  # 128: explicit calls only
    ng = _largest_ng(8, groups)
    ctas = triton.cdiv(n, 128) * triton.cdiv(t, bm)
    split = 1
    while ctas * split < 2 * num_sms and groups // (ng * split * 2) >= 2:
        split *= 2
    return MMConfig(bm, 128, ng, split, warps=8, stages=2, swap=True)


def qmm_launch(
    x: torch.Tensor,  # [T, K] fp16 / bf16 / fp32, K a multiple of 32
    planes: list[torch.Tensor],
    fmt: str,
    n: int,
    bias: torch.Tensor | None,
    cfg: MMConfig,
) -> torch.Tensor:  # [T, N] in x.dtype
    t, k = x.shape
    groups = k // 32
    # k-quant steps cover whole 256-element super-blocks (their d/dmin pointers step by NG/8)
    ng = _largest_ng(max(cfg.ng, 8) if fmt in SUPER_BLOCK else cfg.ng, groups)
    per_split = triton.cdiv(triton.cdiv(groups, ng), cfg.split) * ng
    split = triton.cdiv(groups, per_split)
    dtype = torch.float32 if split > 1 else x.dtype  # split K: fp32 atomics into zeros
    acc = (torch.zeros if split > 1 else torch.empty)((t, n), device=x.device, dtype=dtype)
    ps = list(planes) + [planes[0]] * (5 - len(planes))
    grid = (triton.cdiv(n, cfg.bn), triton.cdiv(t, cfg.bm), split)
    _qmm_kernel[grid](
        x, acc, bias if bias is not None else acc, *ps,
        t, n, groups, x.stride(0), acc.stride(0), per_split,
        FMT=FMT_CODES[fmt], BM=cfg.bm, BN=cfg.bn, NG=ng, HAS_BIAS=bias is not None,
        ATOMIC=split > 1, PREC="ieee" if x.dtype == torch.float32 else "tf32", SWAP=cfg.swap, num_warps=cfg.warps, num_stages=cfg.stages,
    )  # fmt: skip
    return acc if split == 1 else acc.to(x.dtype)
