"""paged_attention: reference vs dense naive attention; Triton vs reference (interpreter/GPU)."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

import pytest
import torch

from localllm.kernels.attention.kv_dtypes import dequantize_kv, is_quantized, quantize_kv
from localllm.kernels.registry import Ops, triton_available

REF = Ops("reference")
DEV = "cuda" if torch.cuda.is_available() else "cpu"
KV_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.float8_e4m3fn]
# max |out - dense fp64 oracle| for unit-variance K/V, by cache dtype
KV_TOL = {
    torch.float32: 1e-5,
    torch.float16: 2e-3,
    torch.bfloat16: 1.5e-2,
    torch.int8: 5e-2,
    torch.float8_e4m3fn: 0.15,
}
needs_triton = pytest.mark.skipif(not triton_available(), reason="triton is not installed")
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@dataclass
class Batch:
    q: torch.Tensor  # [T, Hq, D]
    caches: tuple  # (k_cache, v_cache, k_scale, v_scale)
    block_tables: torch.Tensor  # [B, max_blocks] int32
    cu: torch.Tensor  # [B + 1] int32
    seq_lens: torch.Tensor  # [B] int32
    dense: list  # per sequence (k [L, Hkv, D], v [L, Hkv, D]) fp32 originals
    stored: list  # the same after the cache's rounding / quantization round trip
    max_q_len: int
    max_seq_len: int

    def args(self, scale: float) -> tuple:
        return (
            self.q,
            *self.caches,
            self.block_tables,
            self.cu,
            self.seq_lens,
            self.max_q_len,
            self.max_seq_len,
            scale,
        )


def _write_pages(cache, scale, ids, x) -> None:
    """x [L, Hkv, D] fp32 -> pages ids of cache (quantized when needed); the page tail is NaN."""
    bs = cache.shape[2]
    n = len(ids) * bs
    pad = torch.full((n - x.shape[0], *x.shape[1:]), float("nan"))
    full = torch.cat([x, pad]).reshape(len(ids), bs, *x.shape[1:]).transpose(1, 2)  # [n, H, bs, D]
    if is_quantized(cache.dtype):
        values, s = quantize_kv(torch.nan_to_num(full), cache.dtype)
        s[torch.isnan(full).any(-1)] = float("nan")  # unused slots: poison the scales
        cache[ids], scale[ids] = values.to(cache.device), s.to(cache.device)
    else:
        cache[ids] = full.to(cache.dtype).to(cache.device)


def _round_trip(x: torch.Tensor, kv_dtype: torch.dtype) -> torch.Tensor:
    if is_quantized(kv_dtype):
        return dequantize_kv(*quantize_kv(x, kv_dtype))
    return x.to(kv_dtype).float()


def make_batch(seqs, hq, hkv, d, bs, kv_dtype, dtype, seed=0, device=DEV) -> Batch:
    """seqs: [(q_len, seq_len)]; pages get shuffled block ids, unused table entries hit a NaN page."""
    g = torch.Generator().manual_seed(seed)
    need = [-(-sl // bs) for _, sl in seqs]
    nblocks = sum(need) + 2
    perm = torch.randperm(nblocks, generator=g).tolist()
    poison = perm.pop()  # a page full of NaN that only out-of-range table entries point to
    width = max(max(need), 1) + 1
    shape = (nblocks, hkv, bs, d)
    k_cache = torch.zeros(shape, dtype=kv_dtype, device=device)
    v_cache = torch.zeros_like(k_cache)
    quant = is_quantized(kv_dtype)
    k_scale = torch.ones(shape[:3], device=device) if quant else None
    v_scale = torch.ones(shape[:3], device=device) if quant else None
    _write_pages(k_cache, k_scale, [poison], torch.full((bs, hkv, d), float("nan")))
    _write_pages(v_cache, v_scale, [poison], torch.full((bs, hkv, d), float("nan")))
    tables, dense, stored, cu = [], [], [], [0]
    for (q_len, sl), nb in zip(seqs, need, strict=True):
        ids = [perm.pop() for _ in range(nb)]
        tables.append(ids + [poison] * (width - nb))
        k, v = torch.randn(sl, hkv, d, generator=g), torch.randn(sl, hkv, d, generator=g)
        if nb:
            _write_pages(k_cache, k_scale, ids, k)
            _write_pages(v_cache, v_scale, ids, v)
        dense.append((k, v))
        stored.append(tuple(_round_trip(x, kv_dtype) for x in (k, v)))
        cu.append(cu[-1] + q_len)
    q = torch.randn(cu[-1], hq, d, generator=g).to(dtype).to(device)
    i32 = dict(dtype=torch.int32, device=device)
    return Batch(
        q,
        (k_cache, v_cache, k_scale, v_scale),
        torch.tensor(tables, **i32),
        torch.tensor(cu, **i32),
        torch.tensor([s for _, s in seqs], **i32),
        dense,
        stored,
        max(q for q, _ in seqs),
        max(s for _, s in seqs),
    )


def dense_attention(batch: Batch, scale: float, stored: bool = False) -> torch.Tensor:
    """Naive fp64 causal attention over contiguous K/V per sequence (the oracle)."""
    out = torch.zeros(batch.q.shape, dtype=torch.float64)
    cu = batch.cu.tolist()
    hq = batch.q.shape[1]
    for b, (k, v) in enumerate(batch.stored if stored else batch.dense):
        lo, hi, sl = cu[b], cu[b + 1], k.shape[0]
        if hi == lo or sl == 0:
            continue
        rep = hq // k.shape[1]
        kk = k.double().repeat_interleave(rep, dim=1)  # [L, Hq, D]
        vv = v.double().repeat_interleave(rep, dim=1)
        qq = batch.q[lo:hi].double().cpu()  # [n, Hq, D]
        s = torch.einsum("nhd,lhd->hnl", qq, kk) * scale
        n = hi - lo
        mask = torch.ones(n, sl, dtype=torch.bool).triu(sl - n + 1)  # future keys
        p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        out[lo:hi] = torch.einsum("hnl,lhd->nhd", p, vv)
    return out


MIXED = [(1, 1), (1, 17), (5, 33), (16, 16), (3, 48), (0, 0), (1, 0), (7, 7)]


@pytest.mark.parametrize("kv_dtype", KV_DTYPES)
@pytest.mark.parametrize("hq,hkv,d", [(4, 4, 64), (8, 2, 128), (8, 1, 64)])
def test_reference_matches_dense(kv_dtype: torch.dtype, hq: int, hkv: int, d: int) -> None:
    batch = make_batch(MIXED, hq, hkv, d, 16, kv_dtype, torch.float32, seed=hq + d, device="cpu")
    scale = 1 / math.sqrt(d)
    out = REF.paged_attention(*batch.args(scale))
    assert out.shape == batch.q.shape and not torch.isnan(out).any()
    exact = (out.double() - dense_attention(batch, scale, stored=True)).abs().max().item()
    assert exact < 1e-5, exact  # paging, masking, GQA and dequantization are exact
    err = (out.double() - dense_attention(batch, scale)).abs().max().item()
    assert err < KV_TOL[kv_dtype], err  # the cache dtype's own rounding error
    assert torch.equal(out[batch.cu[-3] : batch.cu[-2]], torch.zeros_like(out[:1]))  # seq_len 0 row


def test_reference_block_size_32_and_out_param() -> None:
    batch = make_batch(
        [(2, 40), (1, 64), (33, 65)], 4, 2, 64, 32, torch.float16, torch.float16, device="cpu"
    )
    out = torch.full_like(batch.q, float("nan"))
    res = REF.paged_attention(*batch.args(0.125), out=out)
    assert res is out
    err = (out.double() - dense_attention(batch, 0.125)).abs().max().item()
    assert err < 5e-3, err


def _compare_triton(batch: Batch, scale: float, tol: float, parts: int | None = None,
                    num_stages: int | None = None, long_context: bool = False) -> torch.Tensor:  # fmt: skip
    from localllm.kernels.attention.paged_triton import kv_dot, run_paged_attention

    expect = REF.paged_attention(*batch.args(scale))
    got = run_paged_attention(*batch.args(scale), parts=parts, num_stages=num_stages,
                              long_context=long_context)  # fmt: skip
    assert got.dtype == batch.q.dtype and not torch.isnan(got).any()
    _, hq, d = batch.q.shape
    k_cache = batch.caches[0]
    group = hq // k_cache.shape[1]
    if kv_dot(k_cache.dtype, batch.q.dtype, batch.max_q_len, group, d, long_context):
        # the dp4a scores round q to int8 per 32 elements (as the dp4a GEMV's activations):
        # within that rounding of the reference, not within fp16 ulps
        err = (got.float() - expect.float()).norm() / expect.float().norm()
        assert err < 1e-2, err
        torch.testing.assert_close(got.float(), expect.float(), atol=3e-2, rtol=3e-2)
        return got
    # absolute + relative: one output ulp of a large value exceeds any absolute bound
    torch.testing.assert_close(got.float(), expect.float(), atol=tol, rtol=tol)
    return got


ACT_TOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


@needs_triton
@pytest.mark.parametrize("kv_dtype", KV_DTYPES)
def test_triton_decode_small(kv_dtype: torch.dtype) -> None:
    seqs = [(1, 1), (1, 9), (1, 20), (1, 0)]  # page boundaries at 4, 8, 16, 20; a padding row
    batch = make_batch(seqs, 8, 2, 32, 4, kv_dtype, torch.float16, seed=1)
    _compare_triton(batch, 0.2, ACT_TOL[torch.float16])


@needs_triton
@pytest.mark.parametrize("parts", [1, 3])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 1), (8, 1)])
def test_triton_speculative_and_split(parts: int, hq: int, hkv: int) -> None:
    seqs = [(3, 19), (1, 5), (4, 4), (2, 33)]
    batch = make_batch(seqs, hq, hkv, 16, 4, torch.int8, torch.float16, seed=hq * 7 + hkv)
    _compare_triton(batch, 0.25, ACT_TOL[torch.float16], parts=parts)


@needs_triton
@pytest.mark.parametrize("parts", [1, 3])
@pytest.mark.parametrize("kv_dtype", [torch.int8, torch.float8_e4m3fn])
def test_triton_mha_decode_quantized_kv(parts: int, kv_dtype: torch.dtype) -> None:
    """MHA decode over int8 / fp8 KV: the planner's 32-token tiles (page boundaries, a tile
    boundary inside a page of 64, split KV)."""
    from localllm.kernels.attention.paged_triton import plan_launch

    seqs = [(1, 1), (1, 33), (1, 70), (1, 0)]
    batch = make_batch(seqs, 4, 4, 32, 64, kv_dtype, torch.float16, seed=13)
    assert plan_launch(4, 4, 1, 32, 1, 70, 1, quantized=True).block_n == 32
    _compare_triton(batch, 0.25, ACT_TOL[torch.float16], parts=parts)


@needs_triton
@pytest.mark.parametrize("parts", [None, 3])
@pytest.mark.parametrize("kv_dtype", [torch.float16, torch.int8])
def test_triton_pages_holding_whole_tiles(parts: int | None, kv_dtype: torch.dtype) -> None:
    """64-token pages under 64-token KV tiles: each tile reads its one page through a scalar
    (`_tile_pages`) instead of a page per position. Decode and verify rows (split KV when
    forced), a prefill chunk after cached tokens, contexts ending inside a tile and on a page
    boundary, an empty sequence; the table's unused entries point at the NaN page."""
    from localllm.kernels.attention.paged_triton import plan_launch

    assert plan_launch(5, 2, 4, 32, 4, 200, 1).block_n == 64
    for seqs in ([(1, 1), (1, 64), (1, 130), (4, 200), (1, 0)], [(70, 190), (64, 64), (1, 129)]):
        batch = make_batch(seqs, 8, 2, 32, 64, kv_dtype, torch.float16, seed=len(seqs))
        _compare_triton(batch, 0.25, ACT_TOL[torch.float16], parts=parts)


@needs_triton
@pytest.mark.parametrize("kdot", [1, 2])
@pytest.mark.parametrize("parts", [1, 3])
def test_triton_mha_int8_long_context_scores_by_dp4a(monkeypatch, kdot: int, parts: int) -> None:
    """A long-context step of one query row per KV head over int8 KV takes the dp4a scores
    (`kv_dot`): 128-token tiles over 16-token pages, ends inside a tile, an empty sequence,
    split KV; P V with V widened (1) or on int8 with P quantized (2). Agrees with the reference
    within the int8 tolerance and differs from the tensor-core loop, which the same step takes
    when it is not a long-context step; other shapes never take it."""
    from localllm.kernels.attention import paged_triton as pt

    monkeypatch.setattr(pt, "MHA_INT8_KDOT", kdot)
    assert pt.kv_dot(torch.int8, torch.float16, 1, 1, 64, True) == kdot
    assert pt.kv_dot(torch.int8, torch.bfloat16, 1, 1, 128, True) == kdot
    for args in ((torch.int8, torch.float16, 1, 1, 64, False),  # not a long-context step
                 (torch.float8_e4m3fn, torch.float16, 1, 1, 64, True),  # fp8 KV
                 (torch.float16, torch.float16, 1, 1, 64, True),  # float KV
                 (torch.int8, torch.float16, 2, 1, 64, True),  # verify rows
                 (torch.int8, torch.float16, 1, 4, 64, True),  # grouped heads
                 (torch.int8, torch.float32, 1, 1, 64, True),
                 (torch.int8, torch.float16, 1, 1, 96, True),  # padded lanes
                 (torch.int8, torch.float16, 1, 1, 48, True)):  # fmt: skip
        assert pt.kv_dot(*args) == 0, args
    assert pt.plan_launch(1, 32, 1, 128, 1, 4161, 264, quantized=True, kdot=kdot).block_n == 128
    seqs = [(1, 1), (1, 130), (1, 300), (1, 0)]
    batch = make_batch(seqs, 2, 2, 64, 16, torch.int8, torch.float16, seed=17 + kdot)
    long = _compare_triton(batch, 0.25, ACT_TOL[torch.float16], parts=parts, long_context=True)
    short = _compare_triton(batch, 0.25, ACT_TOL[torch.float16], parts=parts)
    assert not torch.equal(long, short)  # q rounded to int8: another loop ran


@needs_triton
def test_triton_long_context_keeps_other_launches() -> None:
    """Grouped heads over int8 KV have no long-context loop: the flag changes no bit."""
    from localllm.kernels.attention.paged_triton import run_paged_attention

    batch = make_batch([(1, 1), (1, 130), (1, 0)], 8, 2, 64, 16, torch.int8, torch.float16,
                       seed=23)  # fmt: skip
    args = batch.args(0.25)
    a = run_paged_attention(*args, long_context=True)
    b = run_paged_attention(*args, long_context=False)
    assert torch.equal(a, b)


@needs_triton
@pytest.mark.parametrize("parts", [None, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_triton_prefill_chunks_after_cache(dtype: torch.dtype, parts: int | None) -> None:
    if dtype == torch.bfloat16 and INTERPRET:
        pytest.skip("the Triton interpreter computes bf16 tl.dot wrongly (covered by gpu tests)")
    seqs = [(20, 20), (18, 37), (1, 6), (0, 0)]  # max_q_len > 16 takes the prefill plan
    batch = make_batch(seqs, 4, 2, 32, 8, torch.float16, dtype, seed=5)
    _compare_triton(batch, 0.17, ACT_TOL[dtype], parts=parts)  # 3: chunks over a split KV


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_triton_prefill_chunk_in_a_long_window_spreads_its_context(monkeypatch, dtype) -> None:
    """A CUDA graph plans a chunk's KV split for its window (max_model_len), not for the live
    context: the live context is spread over the launch's partitions, MIN_PART (128) tokens
    each at least, as a plan for its own length would (a 512-token context of a 2,048-token
    window over 4 partitions: 4 hold keys, not 1), and the result is the reference's."""
    from localllm.kernels.attention import paged_triton as pt

    real = pt._merge_kernel
    seen: list[torch.Tensor] = []

    class Spy:  # records the partitions' log-sum-exp that the merge kernel is handed
        def __getitem__(self, grid):  # noqa: ANN001, ANN204
            def launch(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
                seen.append(args[1].clone())
                return real[grid](*args, **kwargs)

            return launch

    monkeypatch.setattr(pt, "_merge_kernel", Spy())
    seqs = [(20, 512), (1, 200), (0, 0)]  # the chunk; a decode row; a padding sequence
    batch = make_batch(seqs, 4, 2, 32, 8, torch.float16, dtype, seed=9)
    batch = dataclasses.replace(batch, max_seq_len=2048)
    _compare_triton(batch, 0.17, ACT_TOL[dtype], parts=4)
    (lse,) = seen  # [T, Hq, 4]
    assert torch.isfinite(lse[:20]).all(), lse[:20, 0]  # every partition holds chunk keys
    # 200 tokens: two partitions of 128, not four of 64
    assert torch.isfinite(lse[20, :, :2]).all() and torch.isinf(lse[20, :, 2:]).all()


def test_plan_splits_short_chunks_over_long_contexts() -> None:
    from localllm.kernels.attention.paged_triton import plan_launch

    # 8 decodes + a 24-token chunk of an 8000-token prompt: the chunk's 16 row tiles split KV
    mixed = plan_launch(9, 8, 4, 128, 24, 8000, 264)
    assert mixed.parts > 8 and mixed.part_len >= 128
    # a 2048-token chunk has row tiles enough; decode keeps its own split rule
    assert plan_launch(1, 8, 4, 128, 2048, 8000, 264).parts == 1
    assert plan_launch(32, 8, 4, 128, 1, 4000, 264).parts == 2
    # a chunk's programs stay within the target, rounded down (the partial wave past it that
    # rounding up gave measured 15-38% slower, H200): llama2-7b (32 KV heads) 24 tokens -> 8
    # partitions, 112 tokens -> 4; llama3-8b 112 tokens (7 row tiles of 16 tokens x 4 heads)
    # -> 4, 24 tokens -> 16
    for n_kv, group, q_len, want in (
        (32, 1, 24, 8),
        (32, 1, 112, 4),
        (8, 4, 112, 4),
        (8, 4, 24, 16),
    ):
        p = plan_launch(1, n_kv, group, 128, q_len, 8000, 264, stages=3)
        assert p.parts == want and n_kv * p.m_blocks * p.parts <= 264, (n_kv, q_len, p)
    # more row tiles than half the target (a 512-token prefill): 2 partitions, as before
    assert plan_launch(1, 32, 1, 128, 512, 8000, 264, stages=3).parts == 2
    assert plan_launch(1, 8, 4, 128, 512, 8000, 264, stages=3).parts == 2


def test_prefill_tiles_over_float_kv_pipeline_deeper_where_they_fit() -> None:
    """A prefill tile over a float cache asks for PREFILL_FLOAT_STAGES; on a GPU whose shared
    memory does not hold its tiles at that depth (99 KB, RTX 30xx / 40xx) the depth steps
    down to 2 before the tiles shrink; decode and int8 KV keep theirs."""
    from localllm.kernels.attention.paged_triton import (
        PREFILL_FLOAT_STAGES,
        attn_smem,
        kv_stages,
        plan_launch,
    )

    h200, rtx = 227 * 1024, 99 * 1024
    ask = kv_stages(False, 24)
    assert ask == PREFILL_FLOAT_STAGES > 2 and kv_stages(False, 16) == 2
    assert kv_stages(True, 24) == kv_stages(True, 1) == 1
    big = plan_launch(1, 8, 4, 128, 24, 4000, 264, smem=h200, stages=ask)
    small = plan_launch(1, 8, 4, 128, 24, 4000, 264, smem=rtx, stages=ask)
    assert big.stages == ask and attn_smem(big.block_m, big.block_n, 128, 2, ask) <= h200
    assert small.stages == 2 and (small.block_m, small.block_n) == (big.block_m, big.block_n)
    assert attn_smem(small.block_m, small.block_n, 128, 2, 2) <= rtx
    assert (
        plan_launch(1, 8, 4, 128, 1, 4000, 264, smem=h200, stages=kv_stages(False, 1)).stages == 2
    )


def test_decode_plan_splits_long_contexts_of_few_heads() -> None:
    """Batch 1 with 32 KV heads over 16K tokens: partitions of at most DECODE_PART_TILES tiles
    (the wave rule alone gave 9 of ~1,800), within LONG_WAVES waves of programs; a batch whose
    sequences x heads fill the GPU keeps the wave rule."""
    from localllm.kernels.attention.paged_triton import (
        DECODE_PART_TILES,
        LONG_WAVES,
        plan_launch,
    )

    p = plan_launch(1, 32, 1, 128, 1, 16640, 264)
    assert p.part_len <= DECODE_PART_TILES * p.block_n and p.parts * 32 <= LONG_WAVES * 264 + 32
    assert plan_launch(1, 8, 4, 128, 1, 16640, 264).parts == 33
    assert plan_launch(1, 32, 1, 128, 1, 300, 264).parts == 3  # short: MIN_PART tokens each
    assert plan_launch(64, 8, 4, 128, 1, 16640, 264).parts == 1
    # int8 / fp8 KV with one query row per KV head (MHA decode) reads 32-token tiles
    assert plan_launch(1, 32, 1, 128, 1, 16640, 264, quantized=True).block_n == 32
    # ... converted by Triton; widened by PTX (`kv_widen`) it reads 64-token tiles
    assert plan_launch(1, 32, 1, 128, 1, 16640, 264, quantized=True, widen=1).block_n == 64
    assert plan_launch(1, 8, 4, 128, 1, 16640, 264, quantized=True).block_n == 64
    assert plan_launch(1, 32, 1, 128, 2, 16640, 264, quantized=True).block_n == 64  # verify
    # ... and partitions of at most DECODE_PART_TILES of them: llama2-7b int8 at 4,161 tokens
    mha8 = plan_launch(1, 32, 1, 128, 1, 4161, 264, quantized=True)
    assert (mha8.parts, mha8.part_len) == (17, 8 * 32)
    assert plan_launch(1, 32, 1, 128, 1, 4161, 264).parts == 9  # fp16: 64-token tiles


@needs_triton
def test_triton_tiny_head_dim_fp8() -> None:
    batch = make_batch([(2, 11), (1, 3)], 8, 4, 8, 4, torch.float8_e4m3fn, torch.float16, seed=9)
    _compare_triton(batch, 0.35, ACT_TOL[torch.float16])  # head_dim 8 (stories260K) padded to 16


def _random_seqs(n: int, max_len: int, q_max: int, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, max_len + 1, (n,), generator=g).tolist()
    return [(min(int(torch.randint(1, q_max + 1, (1,), generator=g)), sl), sl) for sl in lens]


@pytest.mark.gpu
@pytest.mark.parametrize("kv_dtype", KV_DTYPES)
@pytest.mark.parametrize("hq,hkv,d", [(32, 32, 128), (32, 8, 128), (32, 4, 64), (16, 2, 256)])
def test_triton_gpu_decode_realistic(kv_dtype, hq, hkv, d) -> None:
    for b, max_len, q_max, dtype in (
        (1, 4000, 1, torch.float16),
        (64, 1200, 1, torch.bfloat16),
        (16, 3000, 6, torch.float16),
    ):
        batch = make_batch(_random_seqs(b, max_len, q_max, b), hq, hkv, d, 16, kv_dtype, dtype)
        _compare_triton(batch, d**-0.5, ACT_TOL[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("hq,d,bs", [(32, 128, 16), (16, 64, 32)])
def test_triton_gpu_long_context_mha_int8(dtype, hq, d, bs) -> None:
    """Long-context steps of MHA over int8 KV (the dp4a scores, fp16 and bf16 activations) at
    llama2-like shapes: one sequence of up to 9K tokens, then six of up to 8.3K (random
    lengths), within q's int8 rounding of the reference."""
    for b, max_len in ((1, 9000), (6, 8300)):
        batch = make_batch(_random_seqs(b, max_len, 1, b + d), hq, hq, d, bs, torch.int8, dtype)
        _compare_triton(batch, d**-0.5, ACT_TOL[dtype], long_context=True)


@pytest.mark.gpu
@pytest.mark.parametrize("kv_dtype", [torch.float16, torch.int8, torch.float8_e4m3fn])
@pytest.mark.parametrize("hq,hkv,d,bs", [(32, 8, 128, 16), (8, 2, 64, 32), (16, 16, 64, 16)])
def test_triton_gpu_prefill_realistic(kv_dtype, hq, hkv, d, bs) -> None:
    seqs = [(1000, 1000), (513, 2100), (1, 77), (300, 301), (64, 64)]
    for dtype in (torch.float16, torch.bfloat16):
        batch = make_batch(seqs, hq, hkv, d, bs, kv_dtype, dtype, seed=d)
        _compare_triton(batch, d**-0.5, ACT_TOL[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("kv_dtype", [torch.float16, torch.int8])
@pytest.mark.parametrize("hq,hkv,bs", [(32, 8, 64), (32, 32, 64), (32, 32, 32)])
def test_triton_gpu_pages_holding_whole_tiles(kv_dtype, hq, hkv, bs) -> None:
    """Pages of 32 / 64 tokens, each holding whole KV tiles (one page read per tile): decode,
    verify rows and prefill chunks at 7-8B shapes against the reference."""
    for b, max_len, q_max in ((1, 4000, 1), (16, 3000, 6)):
        batch = make_batch(_random_seqs(b, max_len, q_max, b + bs), hq, hkv, 128, bs, kv_dtype,
                           torch.float16)  # fmt: skip
        _compare_triton(batch, 128**-0.5, ACT_TOL[torch.float16])
    seqs = [(1000, 1000), (513, 2100), (1, 77), (300, 301), (64, 64)]
    batch = make_batch(seqs, hq, hkv, 128, bs, kv_dtype, torch.float16, seed=bs)
    _compare_triton(batch, 128**-0.5, ACT_TOL[torch.float16])


@pytest.mark.gpu
def test_triton_decode_cuda_graph_replay() -> None:
    """Capture once with an upper-bound max_seq_len; replay with new lengths and queries."""
    tri = Ops("triton")
    batch = make_batch(_random_seqs(8, 2000, 1, 1), 32, 8, 128, 16, torch.int8, torch.float16)
    q, lens = batch.q.clone(), batch.seq_lens.clone()
    args = (q, *batch.caches, batch.block_tables, batch.cu, lens, 1, 2048, 0.088)
    tri.paged_attention(*args)  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = tri.paged_attention(*args)
    for step in range(3):
        if step:  # shorter prefixes of the same pages, a padding row, fresh queries
            frac = torch.rand(8, device="cuda")
            lens.copy_((batch.seq_lens * frac).to(torch.int32).clamp(min=1))
            lens[step] = 0
            q.normal_()
        graph.replay()
        torch.cuda.synchronize()
        expect = REF.paged_attention(*args)
        assert (out.float() - expect.float()).abs().max().item() < 4e-3


def test_kv_widen_policy() -> None:
    """int8 KV under fp16 activations is widened by the packed-fp16 PTX on a GPU (sm_86 and
    sm_89 profiles too: the consumer check compiles it) in tiles of up to WIDEN_MAX_ROWS query
    rows; other dtypes, longer chunks and the interpreter take Triton's conversion."""
    from localllm.kernels.attention.paged_triton import WIDEN_MAX_ROWS, kv_widen
    from localllm.kernels.device import INTERPRETER, profile

    for gpu in ("h200", "rtx3060", "rtx4090"):
        for rows in (1, 4, 20, WIDEN_MAX_ROWS):  # decode, MHA / GQA verify rows
            assert kv_widen(torch.int8, torch.float16, profile(gpu), rows) == int(not INTERPRET)
        assert kv_widen(torch.int8, torch.float16, profile(gpu), WIDEN_MAX_ROWS + 1) == 0
        for kv, act in ((torch.int8, torch.bfloat16), (torch.float16, torch.float16),
                        (torch.float8_e4m3fn, torch.float16), (torch.int8, torch.float32)):  # fmt: skip
            assert kv_widen(kv, act, profile(gpu), 1) == 0
    assert kv_widen(torch.int8, torch.float16, INTERPRETER, 1) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("hq,hkv,q_max", [(32, 32, 1), (32, 8, 1), (16, 16, 6), (32, 8, 5)])
def test_triton_gpu_int8_widen_matches_triton_conversion(monkeypatch, hq, hkv, q_max) -> None:
    """The PTX widening of int8 KV (`_I8_TO_F16`) is exact: the kernel's output is the one with
    Triton's own int8 -> fp16 conversion to within the rounding of a different summation order
    (H200: 309 of 24,576 values differed, by at most 3.1e-5), 30x tighter than the reference
    bound (MHA and grouped decode, verify rows, every int8 value the quantizer stores)."""
    from localllm.kernels.attention import paged_triton as pt

    batch = make_batch(_random_seqs(6, 3000, q_max, hq), hq, hkv, 128, 16, torch.int8,
                       torch.float16, seed=hq + q_max)  # fmt: skip
    rows = q_max * (hq // hkv)
    assert pt.kv_widen(torch.int8, torch.float16, pt.device_props(batch.q.device), rows) == 1
    fast = pt.run_paged_attention(*batch.args(0.09))
    monkeypatch.setattr(pt, "kv_widen", lambda *a: 0)
    plain = pt.run_paged_attention(*batch.args(0.09))
    torch.testing.assert_close(fast.float(), plain.float(), atol=1.25e-4, rtol=1e-3)
    _compare_triton(batch, 0.09, ACT_TOL[torch.float16])


@needs_triton
@pytest.mark.parametrize("layout", ["w4", "w8"])
def test_triton_split_decode_emits_int8_output(layout: str) -> None:
    """One decoding token with a split-KV plan and `quant`: the merge also writes the int8
    form of the output (as one [Hq D] row), equal to quantizing the output afterwards; without
    a split the plain output comes back (the GEMV quantizes it)."""
    from localllm.kernels.attention.paged_triton import run_paged_attention
    from localllm.kernels.fused.quant_act import QAct
    from localllm.kernels.fused.quant_act_triton import quant_act_triton

    batch = make_batch([(1, 200)], 4, 2, 32, 4, torch.float16, torch.float16, seed=3)
    got = run_paged_attention(*batch.args(0.2), parts=3, quant=layout)
    assert isinstance(got, QAct) and got.x.shape == (1, 4 * 32)
    plain = run_paged_attention(*batch.args(0.2), parts=3)
    assert torch.equal(got.x, plain.reshape(1, -1))
    q, s = got.q[layout]
    rq, rs = quant_act_triton(got.x, layout)
    assert torch.equal(q, rq)
    torch.testing.assert_close(s, rs)
    assert not isinstance(run_paged_attention(*batch.args(0.2), parts=1, quant=layout), QAct)


@needs_triton
def test_triton_decode_merges_in_kernel() -> None:
    """Decode over a split KV merges in the attention kernel: sequences holding keys in one,
    two or three partitions (and a padding row) side by side, twice in a row (the counters
    reset themselves), with and without the int8 output."""
    from localllm.kernels.attention import paged_triton as at
    from localllm.kernels.fused.quant_act import QAct
    from localllm.kernels.fused.quant_act_triton import quant_act_triton

    seqs = [(1, 200), (1, 5), (1, 129), (1, 0), (2, 300)]
    batch = make_batch(seqs, 8, 2, 32, 16, torch.float16, torch.float16, seed=11)
    assert at.plan_launch(5, 2, 4, 32, 2, 300, 1, parts=4).parts == 3
    for parts in (4, 4, 2):  # 2: the grid, not a quarter of the context, sets the length
        _compare_triton(batch, 0.2, ACT_TOL[torch.float16], parts=parts)
    assert all(int(c.abs().sum()) == 0 for c in at._COUNTERS.buffers())
    # a plan made for a long window (a CUDA graph's) over short live contexts: the kernel
    # spreads them over the partitions the planner would plan for them (forced here)
    args = list(batch.args(0.2))
    args[9] = 4096  # max_seq_len: the window the plan is for
    expect = REF.paged_attention(*batch.args(0.2))
    for live in (1, 8):
        got = at.run_paged_attention(*args, parts=16, live_parts=live)
        tol = ACT_TOL[torch.float16]
        torch.testing.assert_close(got.float(), expect.float(), atol=tol, rtol=tol)
    plan = at.plan_launch(1, 8, 4, 128, 1, 16640, 264)  # llama3-8b, batch 1, H200-sized
    assert (plan.parts, plan.part_len, plan.live_parts, plan.live_cap) == (33, 512, 33, 132)
    many = at.plan_launch(64, 8, 4, 128, 1, 16640, 264)  # many tiles: the whole grid
    assert many.parts == 1 and (many.live_parts, many.live_cap) == (1, 1)
    one = make_batch([(1, 300)], 8, 2, 32, 16, torch.float16, torch.float16, seed=12)
    got = at.run_paged_attention(*one.args(0.2), parts=4, quant="w4")
    assert isinstance(got, QAct)
    q, s = got.q["w4"]
    rq, rs = quant_act_triton(got.x, "w4")
    assert torch.equal(q, rq)
    torch.testing.assert_close(s, rs)


@needs_triton
@pytest.mark.parametrize("hq,hkv,q_len", [(8, 2, 1), (4, 4, 1), (8, 2, 3)])
def test_triton_decode_merge_reads_partitions_in_steps(hq: int, hkv: int, q_len: int) -> None:
    """The in-kernel merge reads `merge_parts` partitions per round trip: 18 partitions that
    hold keys take several steps, the last one partial (GQA, MHA and 3-token rows; a short
    sequence beside it merges in one)."""
    from localllm.kernels.attention import paged_triton as at

    seqs = [(q_len, 1100), (1, 40)]
    batch = make_batch(seqs, hq, hkv, 32, 16, torch.float16, torch.float16, seed=hq + q_len)
    plan = at.plan_launch(2, hkv, hq // hkv, 32, q_len, 1100, 1, parts=20)
    assert plan.parts == 18 and plan.merge_parts < plan.parts and plan.parts % plan.merge_parts
    assert plan.merge_rows == 1 << (q_len * hq // hkv - 1).bit_length()
    _compare_triton(batch, 0.2, ACT_TOL[torch.float16], parts=20)
    assert all(int(c.abs().sum()) == 0 for c in at._COUNTERS.buffers())


def test_merge_plan_fits_its_register_budget() -> None:
    """The merge's [parts, rows, D] tile stays within MERGE_REGS fp32 per thread: llama3-8b's
    decode and MHA decode read 8 partitions per step, a 5-token verify tile one."""
    from localllm.kernels.attention import paged_triton as at

    for (g, q), want in {(4, 1): 8, (1, 1): 8, (4, 5): 1}.items():
        p = at.plan_launch(1, 32 // g, g, 128, q, 16640, 264)
        assert p.merge_parts == want, (g, q, p)
        assert p.merge_parts * p.merge_rows * 128 <= at.MERGE_REGS * 32 * p.num_warps


@needs_triton
@pytest.mark.parametrize("parts", [1, 2])
@pytest.mark.parametrize("kv_dtype", [torch.float16, torch.int8])
def test_triton_decode_prefetches_the_next_tile(kv_dtype: torch.dtype, parts: int) -> None:
    """One pipeline stage (int8 / fp8 KV by default, float KV when forced) over grouped heads:
    the decode loop loads each next KV tile while the current one computes. Partitions of several tiles, a
    tile across page boundaries, the last tile partial, verify rows."""
    from localllm.kernels.attention.paged_triton import plan_launch

    assert plan_launch(1, 2, 4, 32, 1, 300, 1, stages=1).prefetch
    assert not plan_launch(1, 2, 4, 32, 1, 300, 1, stages=2).prefetch
    assert not plan_launch(1, 2, 4, 32, 40, 300, 1, stages=1).prefetch  # prefill tiles
    assert not plan_launch(1, 8, 1, 32, 1, 300, 1, stages=1).prefetch  # MHA: measured slower
    seqs = [(1, 300), (3, 141), (1, 5), (1, 0)]
    batch = make_batch(seqs, 8, 2, 32, 16, kv_dtype, torch.float16, seed=21)
    _compare_triton(batch, 0.2, ACT_TOL[torch.float16], parts=parts, num_stages=1)


def test_live_context_gets_the_partitions_of_its_own_plan() -> None:
    """A decode graph's plan is for its whole window; the kernel spreads the live context over
    what `plan_launch` plans for that context (waves over sequences x heads, the tile cap;
    one KV tile at least each), within the grid."""
    from localllm.kernels.attention import paged_triton as at
    from localllm.kernels.attention.paged_triton import live_partitions, plan_launch

    llama3 = plan_launch(1, 8, 4, 128, 1, 16640, 264)  # grid: 33 partitions
    assert [live_partitions(s, llama3, 33) for s in (129, 1024, 4161, 16513)] == [3, 16, 33, 33]
    llama2 = plan_launch(1, 32, 1, 128, 1, 16640, 264)
    assert [live_partitions(s, llama2, llama2.parts) for s in (1024, 4161)] == [8, 9]
    int8 = plan_launch(1, 32, 1, 128, 1, 16640, 264, quantized=True)  # 32-token tiles
    assert live_partitions(4161, int8, int8.parts) == 17
    # one stage without the register prefetch (MHA over int8 KV): at least 16 partitions
    serial = plan_launch(1, 32, 1, 128, 1, 16640, 264, stages=1, quantized=True)
    assert not serial.prefetch and serial.live_parts == at.DECODE_SERIAL_PARTS == 16
    assert [live_partitions(s, serial, serial.parts) for s in (1024, 2048, 4161)] == [16, 16, 17]
    own = [plan_launch(1, 32, 1, 128, 1, s, 264, stages=1, quantized=True) for s in (1024, 2048)]
    assert [p.parts for p in own] == [8, 16]  # 1,024 tokens: MIN_PART tokens each at least
    grouped = plan_launch(1, 8, 4, 128, 1, 16640, 264, stages=1, quantized=True)
    assert grouped.prefetch and grouped.live_parts == 33  # overlaps its loads: the wave rule
    assert plan_launch(1, 32, 1, 128, 1, 2048, 264).parts == 8  # fp16, two stages: 9 of 228
    assert plan_launch(64, 32, 1, 128, 1, 2048, 264, stages=1, quantized=True).parts == 1
    for seq in (1024, 4161):  # the live context's own plan, where it fits the window's grid
        own = plan_launch(1, 8, 4, 128, 1, seq, 264)
        assert live_partitions(seq, llama3, 33) >= own.parts
