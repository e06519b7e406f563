"""Triton RoPE + paged KV store (+ int8/fp8 quantization): one launch, one program per token
and KV head.

Each program rotates one key head of its token and the query heads of its GQA group in place
(fp32 math), then writes the rotated key and the value row to the token's cache slot,
quantizing per head with the scale absmax / QMAX when the cache is int8 or fp8 (rules in
`attention/kv_dtypes.py`). (One program per token for all heads left a decode step's single token on one SM:
~10-26 us per layer on the H200 instead of ~3.)
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from localllm.kernels.attention.kv_dtypes import kv_qmax
from localllm.kernels.fused.rope_kv import check_rope_store_args
from localllm.kernels.pdl import pdl_args, pdl_enter


@triton.jit
def _pair_offsets(HALF: tl.constexpr, HALF_PAD: tl.constexpr, INTERLEAVED: tl.constexpr):
    i = tl.arange(0, HALF_PAD)
    if INTERLEAVED:  # GGUF llama pairs (x[2i], x[2i+1])
        o0 = 2 * i
        o1 = 2 * i + 1
    else:  # neox pairs (x[i], x[i + D/2])
        o0 = i
        o1 = i + HALF
    return o0, o1, i < HALF


@triton.jit
def _rotate_heads(X, stride_h, n_heads, cos, sin, o0, o1, dmask, H_PAD: tl.constexpr):
    """Rotate rows X[h, :] for h < n_heads in place; returns the rounded halves [H_PAD, HALF]."""
    h = tl.arange(0, H_PAD)
    mask = (h < n_heads)[:, None] & dmask[None, :]
    base = X + h[:, None] * stride_h
    x0 = tl.load(base + o0[None, :], mask=mask, other=0.0).to(tl.float32)
    x1 = tl.load(base + o1[None, :], mask=mask, other=0.0).to(tl.float32)
    r0 = (x0 * cos[None, :] - x1 * sin[None, :]).to(X.dtype.element_ty)
    r1 = (x0 * sin[None, :] + x1 * cos[None, :]).to(X.dtype.element_ty)
    tl.store(base + o0[None, :], r0, mask=mask)
    tl.store(base + o1[None, :], r1, mask=mask)
    return r0.to(tl.float32), r1.to(tl.float32)


@triton.jit
def _store_pair(C, S, c_off, s_off, x0, x1, o0, o1, rmask, dmask, QMAX: tl.constexpr):
    """Store halves x0/x1 [H_PAD, HALF] at cache rows C + c_off[h]; quantize when QMAX > 0."""
    mask = rmask[:, None] & dmask[None, :]
    if QMAX > 0:
        amax = tl.maximum(tl.max(tl.abs(x0), axis=1), tl.max(tl.abs(x1), axis=1))  # [H_PAD]
        scale = amax / QMAX
        inv = (QMAX / tl.maximum(amax, 1e-30))[:, None]  # an all-zero row stays zero
        y0 = tl.minimum(tl.maximum(x0 * inv, -QMAX), QMAX)
        y1 = tl.minimum(tl.maximum(x1 * inv, -QMAX), QMAX)
        if C.dtype.element_ty == tl.int8:  # round half away from zero, then exact int cast
            y0 = tl.where(y0 >= 0, tl.floor(y0 + 0.5), tl.ceil(y0 - 0.5))
            y1 = tl.where(y1 >= 0, tl.floor(y1 + 0.5), tl.ceil(y1 - 0.5))
        tl.store(S + s_off, scale, mask=rmask)
        x0, x1 = y0, y1
    tl.store(C + c_off[:, None] + o0[None, :], x0.to(C.dtype.element_ty), mask=mask)
    tl.store(C + c_off[:, None] + o1[None, :], x1.to(C.dtype.element_ty), mask=mask)


@triton.jit
def _rope_store_kernel(
    Q,
    K,
    V,
    POS,
    CS,
    KC,
    VC,
    KS,
    VS,
    SLOT,
    stride_qt,
    stride_qh,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_cs,
    stride_kcb,
    stride_kch,
    stride_kct,
    stride_vcb,
    stride_vch,
    stride_vct,
    stride_ksb,
    stride_ksh,
    stride_vsb,
    stride_vsh,
    n_q_heads,
    n_kv_heads,
    BLOCK_SIZE: tl.constexpr,
    HALF: tl.constexpr,
    HALF_PAD: tl.constexpr,
    HQ_PAD: tl.constexpr,
    HKV_PAD: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    QMAX: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """Program (t, j): token t, KV heads [j HKV_PAD, (j + 1) HKV_PAD) and their query heads
    (HQ_PAD = HKV_PAD * n_q_heads / n_kv_heads, padded)."""
    pdl_enter(PDL)
    t = tl.program_id(0).to(tl.int64)
    kv0 = tl.program_id(1) * HKV_PAD
    group = n_q_heads // n_kv_heads
    pos = tl.load(POS + t).to(tl.int64)
    o0, o1, dmask = _pair_offsets(HALF, HALF_PAD, INTERLEAVED)
    cos = tl.load(CS + pos * stride_cs + tl.arange(0, HALF_PAD), mask=dmask, other=0.0)
    sin = tl.load(CS + pos * stride_cs + HALF + tl.arange(0, HALF_PAD), mask=dmask, other=0.0)
    q0 = kv0 * group
    n_q = tl.minimum(HKV_PAD * group, n_q_heads - q0)
    _rotate_heads(Q + t * stride_qt + q0 * stride_qh, stride_qh, n_q, cos, sin, o0, o1, dmask,
                  HQ_PAD)  # fmt: skip
    k0, k1 = _rotate_heads(K + t * stride_kt + kv0 * stride_kh, stride_kh, n_kv_heads - kv0,
                           cos, sin, o0, o1, dmask, HKV_PAD)  # fmt: skip
    slot = tl.load(SLOT + t).to(tl.int64)
    blk = tl.maximum(slot, 0) // BLOCK_SIZE
    off = tl.maximum(slot, 0) % BLOCK_SIZE
    h = kv0 + tl.arange(0, HKV_PAD)
    rmask = (h < n_kv_heads) & (h * 0 + slot >= 0)  # [HKV_PAD]
    mask = rmask[:, None] & dmask[None, :]  # [HKV_PAD, HALF_PAD]
    _store_pair(
        KC,
        KS,
        blk * stride_kcb + h * stride_kch + off * stride_kct,
        blk * stride_ksb + h * stride_ksh + off,
        k0,
        k1,
        o0,
        o1,
        rmask,
        dmask,
        QMAX,
    )
    vbase = V + t * stride_vt + h[:, None] * stride_vh
    v0 = tl.load(vbase + o0[None, :], mask=mask, other=0.0).to(tl.float32)
    v1 = tl.load(vbase + o1[None, :], mask=mask, other=0.0).to(tl.float32)
    _store_pair(
        VC,
        VS,
        blk * stride_vcb + h * stride_vch + off * stride_vct,
        blk * stride_vsb + h * stride_vsh + off,
        v0,
        v1,
        o0,
        o1,
        rmask,
        dmask,
        QMAX,
    )


def _unit_last(name: str, x: torch.Tensor) -> None:
    if x.stride(-1) != 1:
        raise ValueError(f"rope_store_kv: {name} needs a unit stride on its last dimension")


def rope_store_kv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    positions: torch.Tensor,
    cos_sin: torch.Tensor,
    interleaved: bool,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    k_scale: torch.Tensor | None,
    v_scale: torch.Tensor | None,
    slot_mapping: torch.Tensor,
) -> None:
    """Same contract as the reference in rope_kv.py (q and k are rotated in place)."""
    check_rope_store_args(q, k, v, positions, cos_sin, k_cache, v_cache, slot_mapping)
    named = {"q": q, "k": k, "v": v, "cos_sin": cos_sin, "k_cache": k_cache, "v_cache": v_cache}
    for name, x in named.items():
        _unit_last(name, x)
    qmax = kv_qmax(k_cache.dtype)
    if qmax and (k_scale is None or v_scale is None or k_scale.stride(-1) != 1):
        raise ValueError(f"rope_store_kv: a {k_cache.dtype} cache needs unit-stride scales")
    ks = k_scale if qmax and k_scale is not None else k_cache  # dummies when unused
    vs = v_scale if qmax and v_scale is not None else v_cache
    t, hq, d = q.shape
    hkv = k.shape[1]
    if t == 0:
        return
    half = d // 2
    cs = cos_sin.float()  # [max_pos, D]
    kvb = 1  # KV heads per program
    _rope_store_kernel[(t, triton.cdiv(hkv, kvb))](
        q, k, v, positions, cs, k_cache, v_cache, ks, vs, slot_mapping, q.stride(0),
        q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), cs.stride(0),
        *k_cache.stride()[:3], *v_cache.stride()[:3], ks.stride(0), ks.stride(1),
        vs.stride(0), vs.stride(1), hq, hkv, BLOCK_SIZE=k_cache.shape[2], HALF=half,
        HALF_PAD=triton.next_power_of_2(half), HQ_PAD=triton.next_power_of_2(kvb * (hq // hkv)),
        HKV_PAD=kvb, INTERLEAVED=bool(interleaved), QMAX=qmax,
        num_warps=_num_warps(kvb, half), **pdl_args(q.device),
    )  # fmt: skip


def _num_warps(kv_heads: int, half: int) -> int:
    """Enough threads for the [heads, D/2] K/V tiles without replicating them across warps
    (their per-head absmax reductions feed the quantization scales)."""
    elems = triton.next_power_of_2(kv_heads) * triton.next_power_of_2(half)
    return max(1, min(4, elems // 32))
