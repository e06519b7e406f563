"""Triton paged attention: plans the launch (decode split-KV or prefill tiles) and runs it.

Everything that sizes the grid or the temporaries comes from tensor shapes and the Python
ints max_q_len / max_seq_len, never from tensor contents, so a decode step is CUDA-graph
capturable (capture with max_seq_len set to the bucket's upper bound). Kernels live in
paged_triton_kernels.py; the contract is the reference's in paged.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton

from localllm.kernels.attention.kv_dtypes import is_quantized
from localllm.kernels.attention.paged import check_attention_args
from localllm.kernels.attention.paged_triton_kernels import _attn_kernel, _merge_kernel
from localllm.kernels.device import DeviceProps, device_props, interpreting
from localllm.kernels.fused.quant_act import QUANT_CODES, QAct
from localllm.kernels.fused.quant_act_triton import act_buffers
from localllm.kernels.pdl import pdl_args
from localllm.kernels.plan import ATTN_DECODE_MAX_Q as DECODE_MAX_Q
from localllm.kernels.plan import mha_int8_kdot
from localllm.kernels.scratch import ZeroScratch

MIN_PART = 128  # fewest KV tokens per partition of a split KV (decode and prefill chunks)
# when a decode batch's sequences x KV heads fill under half the target programs, partitions
# hold at most this many KV tiles while the launch stays within LONG_WAVES waves (H200, batch
# 1, scripts/sweep_long_attention.py: llama2-7b's 32 KV heads at 16K tokens took 9 partitions of
# ~1,800 tokens from the wave rule alone; 33-36 partitions ran int8 KV in 101 us instead of 164,
# fp16 in 74-80 instead of 89). Counted in tiles, not tokens: 512 tokens of 32-token int8 MHA
# tiles (16 per program, 9 partitions) ran llama2-7b at 4,161 tokens in 43.3 us, 16 forced
# partitions in 28.4 (H200); the 17 of this rule 27.3 us, against 43.2 (H100;
# scripts/ab_attention.py, benchmarks/session15/merge_v2_h200 and part_tiles_h100)
DECODE_PART_TILES = 8
LONG_WAVES = 4
# ... and the kernel spreads the live context (a CUDA graph's plan is for its whole window) over
# the partitions this rule would plan for it: the wave rule over sequences x heads, the tile cap
# for long ones (one tile at least each). Session 10 floored it at 16 partitions; with the merge
# reading 8 partitions per round trip, 33 ran llama3-8b at 4,161 tokens in 13.1 us (fp16) and
# 14.0 (int8) where the floor's 14 took 15.7 and 22.4 (H200, benchmarks/session15/merge_v2_h200)
# A program that overlaps none of its loads (one pipeline stage without the register prefetch:
# MHA over int8 / fp8 KV) needs more of them in flight: at least this many partitions per
# sequence when sequences x heads leave SMs idle (H100, cold KV, scripts/ab_attention.py,
# llama2-7b int8, live tokens: 9 partitions / 16: 1,024 14.3 / 10.7 us, 2,048 24.2 / 15.7;
# fp16 at two stages prefers the wave rule's 8-12; benchmarks/session16/mha_parts_h100)
DECODE_SERIAL_PARTS = 16
# the in-kernel merge of a decode split reads up to this many partitions per round trip (1, 2,
# 4 or 8: `_merge_parts`), their [rows, D] outputs within MERGE_REGS fp32 registers per thread
MERGE_MAX_PARTS = 8
MERGE_REGS = 32


@dataclass(frozen=True)
class Plan:
    block_m: int  # query rows per program (TOK tokens x G heads)
    block_n: int  # KV tokens per inner step
    m_blocks: int  # row tiles per sequence
    parts: int  # KV partitions per sequence (> 1: split-KV + merge)
    part_len: int  # KV tokens per partition
    num_warps: int
    live_parts: int = 1  # decode: the wave rule's partitions for any live context ...
    live_cap: int = 1  # ... and at most this many from the tile cap (long live contexts)
    merge_rows: int = 1  # decode split: the rows of a tile that can hold queries (power of 2)
    merge_parts: int = 1  # decode split: partitions the merge reads per round trip
    prefetch: bool = False  # decode with one pipeline stage: KV loaded a tile ahead in registers
    stages: int = 2  # the launch's pipeline depth (the asked one, or less where it did not fit)


def target_programs(props: DeviceProps) -> int:
    """How many programs keep a GPU busy: two waves over its SMs."""
    return 2 * props.sm_count


# the pipeline depth of a prefill tile (more than DECODE_MAX_Q query tokens) over a float KV
# cache, where its tiles fit (`plan_launch` steps a deeper pipeline down first). H200,
# llama3-8b fp16 KV, one layer with its merge, cold KV, us, 2 -> 3 stages
# (scripts/ab_attention.py, benchmarks/session38): 24 query tokens over 4,000 / 8,000 cached
# 22.1 / 32.3 -> 19.7 / 27.1; 112 tokens 58.7 / 111.7 -> 49.4 / 88.9. The 64 x 64 tiles of
# head size 128 need 120 KB at 3 stages, so a 99 KB RTX 30xx / 40xx keeps 2
PREFILL_FLOAT_STAGES = 3


def kv_stages(quantized: bool, max_q_len: int) -> int:
    """The pipeline depth asked of a launch over a KV cache: int8 / fp8 tiles convert in
    registers, 1 stage measured faster; float KV 2 for decode and verify tiles,
    PREFILL_FLOAT_STAGES for prefill tiles."""
    if quantized:
        return 1
    return 2 if max_q_len <= DECODE_MAX_Q else PREFILL_FLOAT_STAGES


# query rows (tokens x grouped heads) up to which int8 KV is widened by PTX: decode and short
# verify tiles, where it was measured. Larger tiles hold the next KV tile in registers (the
# prefetch) beside the widened one: on sm_86 / sm_89 those spill 216-240 B a thread widened,
# none with Triton's conversion (benchmarks/session22)
WIDEN_MAX_ROWS = 32


def kv_widen(kv_dtype: torch.dtype, act_dtype: torch.dtype, props: DeviceProps, rows: int) -> int:
    """How `_attn_kernel` widens the KV tiles of a launch whose tiles hold up to `rows` query
    rows (its WIDEN): 1, int8 KV under fp16 activations on a GPU, up to WIDEN_MAX_ROWS rows,
    by packed-fp16 PTX (`_I8_TO_F16`); 0, Triton's conversion (other dtypes, longer chunks, the
    interpreter, which runs no PTX). H200, cold KV, us per layer, Triton's conversion -> PTX
    (`scripts/ab_attention.py`, benchmarks/session22): one token, llama2-7b 1,024 / 4,161 /
    16,513 tokens 14.2 / 26.9 / 92.8 -> 12.1 / 25.3 / 71.4 (with the 64-token tiles of
    `plan_launch`), llama3-8b 16,513 tokens 31.6 -> 29.7; 5 verify rows, llama2-7b 4,161
    tokens 37.5 -> 25.5."""
    gpu = props.name != "interpreter" and not interpreting()
    fits = rows <= WIDEN_MAX_ROWS
    return int(gpu and fits and kv_dtype == torch.int8 and act_dtype == torch.float16)


# long-context steps of one query row per KV head (MHA decode, e.g. llama2-7b) over int8 KV
# (`plan.mha_int8_kdot`): the scores by `dp4a` on the raw int8 words against the query quantized
# per 32 elements, no K widening (`_kdot_step`); P V in fp16 with V widened (1) or on int8 with
# P quantized per tile (2, P to 8 bits), 128-token tiles. H200, one layer with its merge, us
# (tensor-core scores -> 1 / 2; scripts/ab_attention.py, benchmarks/session28): 1,024 tokens
# 12.0 -> 12.7 / 11.3, 4,161 25.2 -> 25.6 / 23.8, 16,513 71.5 -> 59.3 / 92.5
MHA_INT8_KDOT = 1
KDOT_BLOCK_N = 128


def kv_dot(kv_dtype: torch.dtype, act_dtype: torch.dtype, max_q_len: int, group: int,
           d: int, long_context: bool) -> int:  # fmt: skip
    """The KDOT of a launch: MHA_INT8_KDOT for a long-context step (`plan.LONG_CONTEXT`) that
    `plan.mha_int8_kdot` admits, else 0 (the tensor-core scores)."""
    fits = long_context and mha_int8_kdot(kv_dtype, act_dtype, max_q_len, group, d)
    return MHA_INT8_KDOT if fits else 0


def attn_smem(block_m: int, block_n: int, d_pad: int, elt: int, stages: int) -> int:
    """Shared memory of one attention program, bytes: an upper bound of what Triton 3.9
    allocates on sm_86 and sm_90 (`stages` K and V tiles, the Q and P tiles; `elt` 4 for fp32
    activations, whose dots run in fp32)."""
    return (2 * stages * block_n * d_pad + block_m * (d_pad + block_n)) * elt


def plan_launch(
    batch: int,
    n_kv: int,
    group: int,
    d_pad: int,
    max_q_len: int,
    max_seq_len: int,
    target_programs: int,
    parts: int | None = None,
    smem: int = 1 << 30,
    elt: int = 2,
    stages: int = 2,
    quantized: bool = False,
    widen: int = 0,
    kdot: int = 0,
) -> Plan:
    """Tile sizes and KV split for one call; `parts` forces the split (tests). `smem`: the
    GPU's shared memory per block; tiles shrink until `attn_smem` fits it (`elt`: bytes per
    activation element, `stages`: the pipeline depth asked, `kv_stages` (more than 2 steps
    down to 2 before tiles shrink); `quantized`: an int8 /
    fp8 KV cache; `widen`: how its tiles are widened, `kv_widen`; `kdot`: the launch scores
    by `dp4a`, `kv_dot`)."""
    block_n = 64 if d_pad <= 128 else 32
    if kdot:
        block_n = KDOT_BLOCK_N
    elif quantized and max_q_len <= 1 and group == 1 and not widen:
        # one query row per KV head (MHA) over int8 / fp8 KV converted by Triton: 32-token
        # tiles (H200, scripts/sweep_long_attention.py, llama2-7b int8 at 16K: 100.8 us per
        # layer, the best of 54 variants incl. 64-token tiles at 1-3 stages). Widened by PTX
        # (`kv_widen`), 64-token tiles: 71.4 against 100.0 us with 32 (benchmarks/session22)
        block_n = 32
    max_q_len = max(max_q_len, 1)
    if max_q_len <= DECODE_MAX_Q:
        block_m = min(max(16, triton.next_power_of_2(max_q_len * group)), 128)
    else:
        block_m = 64 if d_pad > 64 else 128
    block_m = max(block_m, triton.next_power_of_2(group))
    while attn_smem(block_m, block_n, d_pad, elt, stages) > smem:
        if stages > 2:
            stages -= 1
        elif block_n > 16:
            block_n //= 2
        elif block_m > max(16, triton.next_power_of_2(group)):
            block_m //= 2
        else:
            break
    tok = block_m // group
    m_blocks = triton.cdiv(max_q_len, tok)
    warps = 4 if block_m * d_pad <= 64 * 128 else 8
    # Triton pipelines nothing at one stage (int8 / fp8 KV): the decode loop itself keeps the
    # next tile's loads in flight, for grouped heads (H200, cold KV, scripts/ab_attention.py:
    # llama3-8b int8 at 16,513 tokens 36.5 -> 31.6 us, one token; MHA lost: llama2-7b int8 at
    # 4,161 tokens 43.3 -> 49.1 us, benchmarks/session15/prefetch_h200)
    prefetch = stages == 1 and max_q_len <= DECODE_MAX_Q and group > 1
    tiles = batch * n_kv * m_blocks
    few = max_q_len <= DECODE_MAX_Q and 2 * tiles <= target_programs
    # the wave rule's partitions, floored for programs that overlap no loads; few sequences x
    # heads: long contexts split finer, up to LONG_WAVES waves
    wave = max(triton.cdiv(target_programs, tiles), 1)
    if few and stages == 1 and not prefetch:
        wave = max(wave, DECODE_SERIAL_PARTS)
    cap = max(triton.cdiv(LONG_WAVES * target_programs, tiles), wave) if few else wave
    if parts is None:
        parts = 1
        most = max(triton.cdiv(max_seq_len, MIN_PART), 1)
        if max_q_len <= DECODE_MAX_Q:
            parts = min(_spread(max_seq_len, wave, cap, block_n), most)
        elif tiles < target_programs:
            # a short chunk over a long context (a cached prefix, a prompt prefilled beside
            # running streams): split the KV too, or the chunk's few row tiles each scan the
            # whole context on one SM (programs past a sequence's end exit at once). As many
            # partitions as keep a sequence's programs within `target_programs`, never a
            # partial wave past it. Rounding up did that: H200, cold fp16 KV, one layer, us,
            # 3 stages, two 113 KB programs per SM, so the target is one wave
            # (benchmarks/session39): llama2-7b 24 tokens over 4,000 / 8,000, 9 -> 8
            # partitions 36.9 / 59.9 -> 28.8 / 44.1; 112 tokens, 5 -> 4, 60.2 / 94.3 -> 44.3 /
            # 72.5; llama3-8b 112 tokens, 5 -> 4, 49.3 / 88.7 -> 43.0 / 70.5; 24 tokens,
            # 17 -> 16, 19.8 / 26.8 -> 19.7 / 26.8. Where that leaves one partition (more
            # than half the target in row tiles: a 512-token prefill) it keeps 2, as before:
            # not measured
            parts = min(max(target_programs // (n_kv * m_blocks), 2), most)
    if parts == 1:
        return Plan(block_m, block_n, m_blocks, 1, 2**30, warps, prefetch=prefetch,
                    stages=stages)  # fmt: skip
    part_len = triton.cdiv(triton.cdiv(max(max_seq_len, 1), parts), block_n) * block_n
    parts = triton.cdiv(max(max_seq_len, 1), part_len)
    rows = triton.next_power_of_2(min(max_q_len, tok) * group)
    per_part = rows * d_pad  # fp32 of one partition's output tile
    merge = min(MERGE_MAX_PARTS, triton.next_power_of_2(parts),
                _pow2_floor(max(MERGE_REGS * 32 * warps // per_part, 1)))  # fmt: skip
    # wave, cap: the live context's partitions (`live_partitions`, in the kernel)
    return Plan(block_m, block_n, m_blocks, parts, part_len, warps, wave, cap, rows, merge,
                prefetch, stages)  # fmt: skip


def _spread(seq_len: int, wave: int, cap: int, block_n: int) -> int:
    """Decode partitions for a `seq_len`-token context: `wave` at least, one per
    DECODE_PART_TILES tiles up to `cap` (the kernel computes the same for the live context)."""
    return max(wave, min(triton.cdiv(seq_len, DECODE_PART_TILES * block_n), cap))


def live_partitions(seq_len: int, plan: Plan, grid_parts: int) -> int:
    """How many partitions of a decode launch over `grid_parts` hold keys of a `seq_len`-token
    context (what `_attn_kernel` computes with MERGE): the plan's length, shortened to spread
    the context over what `plan_launch` would plan for it, a quarter of it at most, and one
    KV tile at least."""
    bn = plan.block_n

    def tiles_of(n: int) -> int:
        return max(triton.cdiv(n, bn), 1) * bn

    want = _spread(seq_len, plan.live_parts, plan.live_cap, bn)
    least = triton.cdiv(triton.cdiv(seq_len, grid_parts), bn) * bn
    part_len = max(min(tiles_of(triton.cdiv(seq_len, 4)), plan.part_len,
                       tiles_of(triton.cdiv(seq_len, want))), least)  # fmt: skip
    return max(triton.cdiv(seq_len, part_len), 1)


def _pow2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def _check_layout(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    k_scale: torch.Tensor | None,
    v_scale: torch.Tensor | None,
    block_tables: torch.Tensor,
) -> None:
    for name, x in (
        ("q", q),
        ("k_cache", k_cache),
        ("v_cache", v_cache),
        ("block_tables", block_tables),
    ):
        if x.stride(-1) != 1:
            raise ValueError(f"paged_attention: {name} needs a unit stride on its last dimension")
    if is_quantized(k_cache.dtype):
        if k_scale is None or v_scale is None or k_scale.stride(-1) != 1 or v_scale.stride(-1) != 1:
            raise ValueError(f"paged_attention: a {k_cache.dtype} cache needs unit-stride scales")


def run_paged_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: torch.Tensor | None,
    v_scale: torch.Tensor | None, block_tables: torch.Tensor, cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor, max_q_len: int, max_seq_len: int, scale: float,
    out: torch.Tensor | None = None, parts: int | None = None, num_stages: int | None = None,
    quant: str | None = None, props: DeviceProps | None = None, live_parts: int | None = None,
    long_context: bool = False,
) -> torch.Tensor | QAct:  # fmt: skip
    """paged_attention with a forced number of KV partitions / pipeline stages (tests, bench).
    With `quant` (an int8 layout), one token and a split-KV plan, the merge also writes the
    int8 form of the output (as one row [Hq D]) and a QAct is returned. A decode plan merges
    in the attention kernel itself: it spreads each sequence's live context over the planned
    partitions (at least one KV tile each), and of those that hold keys the last to finish
    combines them (one partition writes the output directly); longer chunks over a split KV
    spread their live context over the planned partitions too, MIN_PART tokens each at least
    (a graph plans for its window), and take the separate merge kernel. `props`: the GPU the
    plan is for (default: q's device; the interpreter plans one partition). `live_parts` forces
    how many partitions a decode's live context is spread over (tests). `long_context`: the
    step is a long-context step (`plan.LONG_CONTEXT`), which picks the kernel's loop
    (`kv_dot`), not what it computes."""
    check_attention_args(q, k_cache, v_cache, block_tables, cu_seqlens_q, seq_lens)
    _check_layout(q, k_cache, v_cache, k_scale, v_scale, block_tables)
    kv_quant = is_quantized(k_cache.dtype)
    if num_stages is None:
        num_stages = kv_stages(kv_quant, max_q_len)
    t, hq, d = q.shape
    n_kv, bs = k_cache.shape[1], k_cache.shape[2]
    batch, group = seq_lens.shape[0], hq // n_kv
    out = torch.empty_like(q) if out is None else out  # [T, Hq, D]
    if t == 0 or batch == 0:
        return out
    d_pad = max(16, triton.next_power_of_2(d))
    gpu = props or device_props(q.device)
    target = target_programs(gpu) if props or q.device.type == "cuda" else 1
    widen = kv_widen(k_cache.dtype, q.dtype, gpu, max(max_q_len, 1) * group)
    kdot = kv_dot(k_cache.dtype, q.dtype, max_q_len, group, d, long_context)
    plan = plan_launch(batch, n_kv, group, d_pad, max_q_len, max_seq_len, target, parts,
                       gpu.smem_per_block, q.element_size(), num_stages, kv_quant,
                       widen, kdot)  # fmt: skip
    ks = k_scale if kv_quant and k_scale is not None else k_cache  # dummies for float caches
    vs = v_scale if kv_quant and v_scale is not None else v_cache
    split = plan.parts > 1
    # decode split-KV merges in the kernel (the last partition of each row tile to finish)
    merge = split and max_q_len <= DECODE_MAX_Q
    shape = (t, hq, plan.parts) if split else (1, 1, 1)
    lse_p = torch.empty(shape, dtype=torch.float32, device=q.device)  # [T, Hq, P]
    out_p = torch.empty((*shape, d), dtype=torch.float32, device=q.device)  # [T, Hq, P, D]
    code = QUANT_CODES[quant] if split and t == 1 and d == d_pad and d % 32 == 0 else 0
    xq, xs = act_buffers(1, hq * d, q.device) if code else (out, out)
    grid = (plan.m_blocks, batch * n_kv, plan.parts)
    cnt = _COUNTERS.get(q.device, grid[0] * grid[1]) if merge else lse_p
    pdl = pdl_args(q.device)
    _attn_kernel[grid](
        q, k_cache, v_cache, ks, vs, block_tables, cu_seqlens_q, seq_lens, out, out_p,
        lse_p, q.stride(0), q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3],
        ks.stride(0), ks.stride(1), vs.stride(0), vs.stride(1), block_tables.stride(0),
        out.stride(0), out.stride(1), *lse_p.stride(), n_kv, plan.part_len,
        scale * math.log2(math.e), cnt, xq, xs, G=group, BLOCK_M=plan.block_m,
        BLOCK_N=plan.block_n, HEAD_DIM=d, D_PAD=d_pad, BLOCK_SIZE=bs, QUANT=kv_quant,
        SPLIT=split, IEEE=q.dtype == torch.float32, MERGE=merge,
        OUT_QUANT=code if merge else 0, num_warps=plan.num_warps, num_stages=plan.stages, **pdl,
        live_parts=(live_parts or plan.live_parts) if merge else 1,
        live_cap=(live_parts or plan.live_cap) if merge else 1,
        PART_TILES=DECODE_PART_TILES, MIN_PART=MIN_PART,
        MERGE_ROWS=plan.merge_rows if merge else 1, MERGE_PARTS=plan.merge_parts if merge else 1,
        PREFETCH=plan.prefetch, WIDEN=widen, KDOT=kdot, EMU=interpreting(),
    )  # fmt: skip
    if split and not merge:
        _merge_kernel[(t, hq)](
            out_p, lse_p, out, xq, xs, lse_p.stride(0), lse_p.stride(1), out.stride(0),
            out.stride(1), plan.parts, hq, HEAD_DIM=d, D_PAD=d_pad,
            P_PAD=max(2, triton.next_power_of_2(plan.parts)), QUANT=code, num_warps=4, **pdl,
        )  # fmt: skip
    if code and quant is not None and out.is_contiguous():
        return QAct(out.view(1, hq * d), {quant: (xq, xs)})
    return out


# per row tile of a decode step: how many KV partitions have stored (the last one merges)
_COUNTERS = ZeroScratch(torch.int32)


def paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    k_scale: torch.Tensor | None,
    v_scale: torch.Tensor | None,
    block_tables: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seq_lens: torch.Tensor,
    max_q_len: int,
    max_seq_len: int,
    scale: float,
    out: torch.Tensor | None = None,
    quant: str | None = None,
    long_context: bool = False,
) -> torch.Tensor | QAct:
    """Same contract as the reference in attention.py; returns [T, Hq, D] in q.dtype, or with
    `quant` possibly a QAct of the output as [1, Hq D] rows (see run_paged_attention;
    `long_context` picks the kernel's loop there).

    Rows past cu_seqlens_q[-1] (if any) are left unwritten.
    """
    return run_paged_attention(
        q,
        k_cache,
        v_cache,
        k_scale,
        v_scale,
        block_tables,
        cu_seqlens_q,
        seq_lens,
        max_q_len,
        max_seq_len,
        scale,
        out,
        quant=quant,
        long_context=long_context,
    )
