"""Every Triton launch the dispatch can choose on a device profile, for the model shapes of
`models.py`: the kernel `plan.py` picks per row count, the config the launch rules pick from
the shapes and the profile, and the launch the real launcher builds (on meta tensors, under
`capture`). Deduplicated by what Triton compiles (kernel, argument types and
specializations, constexprs, warps, stages).

Rows: every decode batch 1..128 plus prefill chunks (any row count above 128 takes the same
dequantize + cuBLAS launch; attention takes the CUDA-graph batch buckets, since only its
split decision depends on the batch), every quant format with a kernel, fp16 / bf16 / fp32
activations, every KV dtype the profile supports, every KV block size."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch

from localllm.config import BLOCK_SIZES
from localllm.kernels.attention.copy_slots_triton import copy_slots_triton
from localllm.kernels.attention.kv_dtypes import KV_DTYPES, KVDtype
from localllm.kernels.attention.paged_triton import (
    kv_dot,
    kv_stages,
    kv_widen,
    plan_launch,
    run_paged_attention,
    target_programs,
)
from localllm.kernels.checks.capture import Launch, capture
from localllm.kernels.checks.models import MODELS, ModelShape
from localllm.kernels.device import DeviceProps
from localllm.kernels.fused.activation_triton import silu_mul
from localllm.kernels.fused.argmax_triton import argmax_triton
from localllm.kernels.fused.masked_argmax_triton import masked_argmax_triton
from localllm.kernels.fused.norm_triton import add_rms_norm, rms_norm
from localllm.kernels.fused.qkv_rope import Heads
from localllm.kernels.fused.qkv_rope_triton import qkv_rope_store
from localllm.kernels.fused.quant_act import ACT_LAYOUT, QAct
from localllm.kernels.fused.quant_act_triton import quant_act_triton
from localllm.kernels.fused.rope_kv_triton import rope_store_kv
from localllm.kernels.linear.dequant_triton import dequant_config, dequant_launch
from localllm.kernels.linear.dp4a_triton import dp4a_config, dp4a_launch
from localllm.kernels.linear.qlinear import QuantWeight
from localllm.kernels.linear.qlinear_triton import pick_config, qlinear_launch
from localllm.kernels.linear.qmm_triton import mm_config, qmm_launch
from localllm.kernels.pdl import forced, pdl_supported
from localllm.kernels.plan import (
    ATTN_DECODE_MAX_Q,
    DP4A_MAX_T,
    MM_MAX_T,
    LinearKernel,
    linear_kernel,
    long_context_step,
    qkv_fusable,
)
from localllm.kernels.quant import ALL, KERNEL_FORMATS, awq, kernel_facts

META = torch.device("meta")
ACT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
LINEAR_ROWS = (*range(1, MM_MAX_T + 1), MM_MAX_T + 1, 2048)
# decode batches as the CUDA graphs pad them (`engine/cuda_graphs.BUCKETS` up to 128)
DECODE_BATCHES = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128)
PREFILL_Q = (24, 128, 512, 2048)  # prefill chunks (24: the chunk beside decodes)
SEQ_LENS = (1, 128, 1024, 4096, 16384, 131072)

# one call of a launcher on meta tensors, keyed by everything its launches depend on (the
# config chosen, dtypes, and the specializations of the integers it passes: == 1, % 16), so
# that the many row counts choosing one config are captured once
Case = tuple[tuple, Callable[[], object]]


def enumerate_launches(props: DeviceProps, models: list[ModelShape] | None = None) -> list[Launch]:
    """The deduplicated launches of every case (first occurrence kept, in order), with the
    programmatic dependent launch of a GPU that has it (`kernels/pdl.py`)."""
    seen: dict[Launch, None] = {}
    keys: set[tuple] = set()
    with forced(pdl_supported(props)):
        for model in models or list(MODELS.values()):
            for key, case in cases(props, model):
                if (model.name, *key) in keys:
                    continue
                keys.add((model.name, *key))
                with capture() as launches:
                    case()
                seen.update(dict.fromkeys(launches))
    return list(seen)


def _spec(i: int) -> tuple[bool, bool]:
    """How Triton specializes an integer argument."""
    return i == 1, i % 16 == 0


def cases(props: DeviceProps, m: ModelShape) -> Iterator[Case]:
    yield from _linear_cases(props, m)
    yield from _attention_cases(props, m)
    yield from _fused_cases(props, m)


def kv_dtypes(props: DeviceProps) -> list[KVDtype]:
    """The KV dtypes this GPU can store (fp8 needs Ada or newer)."""
    return [k for k in KV_DTYPES.values() if props.capability >= (k.min_capability or (0, 0))]


def _t(*shape: int, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=META)


@functools.lru_cache(maxsize=512)
def _weight(fmt: str, n: int, k: int) -> QuantWeight:
    """A packed weight [n, k] of meta planes with the real plane dtypes and shapes."""
    rows = _pack_rows(fmt, k)
    return QuantWeight(fmt, n, k, {p: _t(n, *t.shape[1:], dtype=t.dtype) for p, t in rows.items()})


def _pack_rows(fmt: str, k: int) -> dict[str, torch.Tensor]:
    """The planes of a few rows of K inputs, packed on the meta device."""
    gguf = {f.name: f for f in ALL if f.kernel is not None}
    if fmt in gguf:
        f = gguf[fmt]
        return f.kernel.pack(_t(1, k // f.block_size, f.type_size, dtype=torch.uint8))  # type: ignore[union-attr,misc]
    q = k // kernel_facts(fmt).min_k  # AWQ: qweight [K, N/8], qzeros [Q, N/8], scales [Q, N]
    i32 = torch.int32
    return awq.pack(_t(k, 1, dtype=i32), _t(q, 1, dtype=i32), _t(q, 8))


# ------------------------------------------------------------------------ quantized linear


def _linear_cases(props: DeviceProps, m: ModelShape) -> Iterator[Case]:
    for fmt in KERNEL_FORMATS:
        for _, n, k, has_bias in m.weights():
            if k % kernel_facts(fmt).min_k:
                continue  # such a tensor comes in another format (the op refuses it)
            for dtype in ACT_DTYPES:
                for rows in LINEAR_ROWS:
                    for int8 in (True, False) if rows <= DP4A_MAX_T else (False,):
                        kernel = linear_kernel(rows, fmt, int8, dtype == torch.float32)
                        cfg = _linear_config(props, kernel, fmt, n, k, rows)
                        key = (fmt, n, k, dtype, has_bias, kernel, cfg, _spec(rows))
                        yield key, functools.partial(_linear, kernel, cfg, fmt, n, k, rows,
                                                     dtype, has_bias)  # fmt: skip


def _linear_config(props: DeviceProps, kernel: LinearKernel, fmt: str, n: int, k: int,
                   rows: int) -> object:  # fmt: skip
    """The config `qlinear_triton` launches `kernel` with on `props`."""
    if kernel is LinearKernel.DP4A_GEMV:
        return dp4a_config(fmt, n, k, props.sm_count, rows)
    if kernel is LinearKernel.FUSED_GEMM:
        return mm_config(fmt, n, k, rows, props.sm_count, props.smem_per_block, props.arch)
    if kernel is LinearKernel.DEQUANT_MATMUL:
        return dequant_config(fmt, n, k, props.sm_count)
    if kernel in (LinearKernel.GEMV, LinearKernel.TILE_GEMM):
        return pick_config(fmt, n, k, rows, props)
    return None  # cuBLAS, or nothing to do


def _linear(kernel: LinearKernel, cfg: Any, fmt: str, n: int, k: int, rows: int,
            dtype: torch.dtype, has_bias: bool) -> None:  # fmt: skip
    """`qlinear_triton`'s launch of `kernel` with `cfg`."""
    w, x = _weight(fmt, n, k), _t(rows, k, dtype=dtype)
    bias = _t(n, dtype=dtype) if has_bias else None
    planes = w.planes
    if kernel is LinearKernel.DP4A_GEMV:
        xq, xs = quant_act_triton(x, ACT_LAYOUT[fmt])
        dp4a_launch(xq, xs, planes, fmt, n, bias, cfg, dtype)
    elif kernel is LinearKernel.FUSED_GEMM:
        qmm_launch(x, planes, fmt, n, bias, cfg)
    elif kernel is LinearKernel.DEQUANT_MATMUL:
        dequant_launch(w, dtype, cfg)  # cuBLAS does the rest
    elif cfg is not None:
        qlinear_launch(x, w, bias, cfg)


# ------------------------------------------------------------------------------ attention


def _attention_cases(props: DeviceProps, m: ModelShape) -> Iterator[Case]:
    shapes = [(b, 1) for b in DECODE_BATCHES]  # decode
    shapes += [(b, q) for b in (1, 4, 32) for q in range(2, ATTN_DECODE_MAX_Q + 1)]  # verify
    shapes += [(1, q) for q in PREFILL_Q] + [(8, q) for q in PREFILL_Q[:1]]  # prefill chunks
    for kv in kv_dtypes(props):
        for dtype in ACT_DTYPES:
            for bs in BLOCK_SIZES:
                for batch, q_len in shapes:
                    for seq in SEQ_LENS:
                        if seq < q_len:
                            continue
                        # a step of a shorter context (in a CUDA graph whose window is `seq`)
                        # and, from plan.LONG_CONTEXT on, a long-context step
                        for long in (False, True) if long_context_step(seq) else (False,):
                            yield from _attention_case(props, m, kv, dtype, bs, batch, q_len,
                                                       seq, long)  # fmt: skip


def _attention_case(props: DeviceProps, m: ModelShape, kv: KVDtype, dtype: torch.dtype, bs: int,
                    batch: int, q_len: int, seq: int, long: bool) -> Iterator[Case]:  # fmt: skip
    d_pad = max(16, 1 << (m.head_dim - 1).bit_length())
    q = kv.quantized  # planned as run_paged_attention plans it
    group = m.n_q // m.n_kv
    kdot = kv_dot(kv.dtype, dtype, q_len, group, m.head_dim, long)
    plan = plan_launch(batch, m.n_kv, group, d_pad, q_len, seq, target_programs(props), None,
                       props.smem_per_block, dtype.itemsize, kv_stages(q, q_len), q,
                       kv_widen(kv.dtype, dtype, props, q_len * group), kdot)  # fmt: skip
    key = (kv, dtype, bs, plan, kdot, _spec(batch * q_len), _spec(-(-seq // bs)))
    yield key, functools.partial(_attention, props, m, kv, dtype, bs, batch, q_len, seq, long)


def _attention(props: DeviceProps, m: ModelShape, kv: KVDtype, dtype: torch.dtype, bs: int,
               batch: int, q_len: int, seq: int, long: bool = False) -> None:  # fmt: skip
    """`paged_attention` as the model calls it (int8 output form for one decode token)."""
    t, d = batch * q_len, m.head_dim
    blocks = -(-seq // bs)
    cache = _t(batch * blocks, m.n_kv, bs, d, dtype=kv.dtype)
    scale = _t(batch * blocks, m.n_kv, bs, dtype=torch.float32) if kv.quantized else None
    for quant in (None, "w4", "w8") if t == 1 else (None,):
        run_paged_attention(
            _t(t, m.n_q, d, dtype=dtype), cache, cache, scale, scale,
            _t(batch, blocks, dtype=torch.int32), _t(batch + 1, dtype=torch.int32),
            _t(batch, dtype=torch.int32), q_len, seq, d**-0.5, quant=quant, props=props,
            long_context=long,
        )  # fmt: skip


# --------------------------------------- norms, SiLU, RoPE + KV, argmax (+ masked), QKV


def _fused_cases(props: DeviceProps, m: ModelShape) -> Iterator[Case]:
    for dtype in ACT_DTYPES:
        for rows in (*DECODE_BATCHES, *PREFILL_Q):
            yield ("pointwise", dtype, rows), functools.partial(_pointwise, m, dtype, rows)
            for kv in kv_dtypes(props):
                yield ("rope", dtype, rows, kv), functools.partial(_rope, m, dtype, rows, kv)
        for kv in kv_dtypes(props):
            for fmts in _qkv_formats():
                yield ("qkv", dtype, kv, fmts), functools.partial(_qkv_fused, m, dtype, kv, fmts)
    for kv in kv_dtypes(props):
        for bs in BLOCK_SIZES:
            yield ("copy", kv, bs), functools.partial(_copy_slots, m, kv, bs)


def _pointwise(m: ModelShape, dtype: torch.dtype, rows: int) -> None:
    quants = (None, "w4", "w8") if rows == 1 else (None,)
    x, w = _t(rows, m.dim, dtype=dtype), _t(m.dim, dtype=dtype)
    g = _t(rows, m.ffn, dtype=dtype)
    for quant in quants:
        rms_norm(x, w, 1e-6, quant)
        add_rms_norm(x, x, w, 1e-6, quant)
        silu_mul(g, g, quant)
    argmax_triton(_t(rows, m.vocab, dtype=torch.float32))
    argmax_triton(_t(rows, m.vocab, dtype=dtype))
    index = _t(rows, dtype=torch.int64)  # grammar masks of constrained rows (guided decoding)
    masks = _t(rows, (m.vocab + 31) // 32, dtype=torch.int32)
    masked_argmax_triton(_t(rows, m.vocab, dtype=torch.float32), masks, index, index)


def _rope(m: ModelShape, dtype: torch.dtype, rows: int, kv: KVDtype) -> None:
    d, bs = m.head_dim, 16
    cache = _t(rows, m.n_kv, bs, d, dtype=kv.dtype)
    scale = _t(rows, m.n_kv, bs, dtype=torch.float32) if kv.quantized else None
    for interleaved in (True, False):
        rope_store_kv(_t(rows, m.n_q, d, dtype=dtype), _t(rows, m.n_kv, d, dtype=dtype),
                      _t(rows, m.n_kv, d, dtype=dtype), _t(rows, dtype=torch.int64),
                      _t(4096, d, dtype=torch.float32), interleaved, cache, cache, scale, scale,
                      _t(rows, dtype=torch.int64))  # fmt: skip


def _copy_slots(m: ModelShape, kv: KVDtype, bs: int) -> None:
    """A prefix hit ending inside a block: its leading slots copied (K/V, then the scales), in
    a small pool and in one whose strides pass 2^31 elements (64-bit arguments)."""
    for blocks in (64, 1 << 16):
        pool = _t(32, 2, blocks, m.n_kv, bs, m.head_dim, dtype=kv.dtype)
        scales = _t(32, 2, blocks, m.n_kv, bs, dtype=torch.float32)
        for src, dst, n in ((1, 0, 1), (5, 7, bs - 1)):  # ids and lengths: not specialized
            copy_slots_triton(pool, src, dst, n)
            if kv.quantized:
                copy_slots_triton(scales, src, dst, n)


def _qkv_formats() -> list[tuple[str, str]]:
    """(q and k format, v format): one format throughout, or a Q4_K_M-style Q6_K v."""
    return [(f, f) for f in KERNEL_FORMATS] + [("q4_k", "q6_k"), ("q4_0", "q8_0")]


def _qkv_fused(m: ModelShape, dtype: torch.dtype, kv: KVDtype, fmts: tuple[str, str]) -> None:
    """A decode token's QKV + RoPE + KV store when `plan.qkv_fusable` takes it."""
    d, dim = m.head_dim, m.dim
    if dim % kernel_facts(fmts[0]).min_k or dim % kernel_facts(fmts[1]).min_k:
        return
    qk, v = m.n_q * d + m.n_kv * d, m.n_kv * d
    ws = [_weight(fmts[0], qk, dim), _weight(fmts[1], v, dim)]
    if fmts[0] == fmts[1]:
        ws = [_weight(fmts[0], qk + v, dim)]
    cache = _t(4, m.n_kv, 16, d, dtype=kv.dtype)
    scale = _t(4, m.n_kv, 16, dtype=torch.float32) if kv.quantized else None
    bias = _t(qk + v, dtype=dtype) if m.qkv_bias else None
    x, cos_sin = QAct(_t(1, dim, dtype=dtype)), _t(4096, d, dtype=torch.float32)
    if not qkv_fusable(x, ws, d, cos_sin, cache, cache):
        return  # the separate GEMV and RoPE + KV store: `_linear` and `_rope` cases
    for interleaved in (True, False):
        qkv_rope_store(x, ws, bias, Heads(m.n_q, m.n_kv, d, interleaved), _t(1, dtype=torch.int64),
                       cos_sin, cache, cache, scale, scale, _t(1, dtype=torch.int64))  # fmt: skip
