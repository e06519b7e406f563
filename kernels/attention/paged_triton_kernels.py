"""Triton kernels of paged attention (launched by paged_triton.py).

One kernel serves decode and prefill. A program owns (a tile of query rows, sequence b, kv head
h, KV partition p). Its BLOCK_M rows are TOK = BLOCK_M // G consecutive query tokens x the G
query heads that share kv head h, so each KV page is read once per head group (GQA packing) and
the score tile is a tensor-core `tl.dot` even for one decode token. Pages are gathered through
the block table and int8/fp8 pages are dequantized on the fly: the per-token K scale multiplies
the score columns and the V scale multiplies the probabilities before P @ V.
  decode  (small q_len): split-KV "flash decoding"; MERGE: the partitions holding keys of a
                         sequence write (out, lse) and the last of them to finish combines them
                         (log-sum-exp merge; one partition writes the output directly). SPLIT
                         without MERGE (short chunks over a long context) leaves the merge to
                         _merge_kernel.
  prefill (large q_len): one partition, rows tiled over the chunk, causal mask against the
                         chunk's positions (which may start after cached tokens).
"""

from __future__ import annotations

import triton
import triton.language as tl

from localllm.kernels.fused.quant_act_triton import _quant_store
from localllm.kernels.pdl import pdl_enter, pdl_trigger, pdl_wait
from localllm.kernels.quant.dp4a_ops_triton import dp4a

# int8 -> fp16 four values at a time (WIDEN = 1): x ^ 0x80 is the byte x + 128, PRMT puts 0x64
# above each byte (the fp16 1024 + x + 128) and one f16x2 subtract of 1152 leaves x, exactly.
# 5 instructions per 4 values, where `.to` converts each value alone (I2F, 16 per clock per SM
# on sm_86-sm_90) after Triton moves the int8 tile into the MMA's layout byte by byte (LDS.S8)
_I8_TO_F16 = tl.constexpr("""{
    .reg .b32 t, b, c;
    mov.b32 b, 0x64646464;
    mov.b32 c, 0x64806480;
    xor.b32 t, $2, 0x80808080;
    prmt.b32 $0, t, b, 0x4140;
    prmt.b32 $1, t, b, 0x4342;
    sub.rn.f16x2 $0, $0, c;
    sub.rn.f16x2 $1, $1, c;
}""")


@triton.jit
def _widen(x, DTYPE: tl.constexpr, WIDEN: tl.constexpr):
    """A KV tile in the activations' dtype: WIDEN 1, int8 -> fp16 by `_I8_TO_F16` (GPU only);
    0, Triton's conversion. The asm is marked impure so that Triton widens the tile where it
    was loaded (16 bytes a thread) and moves fp16 into the MMA's layout (STS.128 / LDSM); as a
    pure op it was moved after an int8 layout change again (sm_90 SASS, MHA decode loop: 564
    instructions per 32-token tile with `.to`, 537 pure, 427 impure)."""
    if WIDEN == 1:
        return tl.inline_asm_elementwise(_I8_TO_F16, "=r,=r,r", [x], dtype=tl.float16,
                                         is_pure=False, pack=4)  # fmt: skip
    else:
        return x.to(DTYPE)


@triton.jit
def _load_kv_tile(C, S, page, n0, h, stride_b, stride_h, stride_t, stride_sb, stride_sh, d, mask,
                  dmask, BLOCK_N: tl.constexpr, BLOCK_SIZE: tl.constexpr, QUANT: tl.constexpr,
                  DTYPE: tl.constexpr, WIDEN: tl.constexpr):  # fmt: skip
    """KV rows n0 .. n0 + BLOCK_N of kv head h in one cache (int64 `page` from `_tile_pages`;
    rows `mask` only) -> ([BLOCK_N, D_PAD] in DTYPE, scales [BLOCK_N] fp32 or zeros). A page
    that holds whole tiles gives a scalar base plus offsets the loop does not change; else each
    row takes its own page."""
    r = tl.arange(0, BLOCK_N)
    if BLOCK_SIZE % BLOCK_N == 0:
        o0 = n0 % BLOCK_SIZE
        base = page * stride_b + h * stride_h + o0 * stride_t
        ptr = C + base + (r[:, None] * stride_t + d[None, :])
        s_off = page * stride_sb + h * stride_sh + o0 + r
    else:
        off = (n0 + r) % BLOCK_SIZE
        ptr = C + page[:, None] * stride_b + h * stride_h + off[:, None] * stride_t + d[None, :]
        s_off = page * stride_sb + h * stride_sh + off
    x = _widen(tl.load(ptr, mask=mask[:, None] & dmask[None, :], other=0.0), DTYPE, WIDEN)
    s = tl.zeros_like(r).to(tl.float32)  # float caches: unused
    if QUANT:
        s = tl.load(S + s_off, mask=mask, other=0.0)
    return x, s


@triton.jit
def _kv_tile(K, V, KS, VS, page, n0, hi, h, stride_kb, stride_kh, stride_kt, stride_vb, stride_vh,
             stride_vt, stride_ksb, stride_ksh, stride_vsb, stride_vsh, d, dmask,
             BLOCK_N: tl.constexpr, BLOCK_SIZE: tl.constexpr, QUANT: tl.constexpr,
             DTYPE: tl.constexpr, WIDEN: tl.constexpr):  # fmt: skip
    """K and V rows n0 .. n0 + BLOCK_N of kv head h (rows < hi only; their pages `page` from
    `_tile_pages`) -> (k, k scales, v, v scales), k and v in DTYPE (`_widen`)."""
    ok = n0 + tl.arange(0, BLOCK_N) < hi
    page = page.to(tl.int64)
    k, ks = _load_kv_tile(K, KS, page, n0, h, stride_kb, stride_kh, stride_kt, stride_ksb,
                          stride_ksh, d, ok, dmask, BLOCK_N, BLOCK_SIZE, QUANT, DTYPE,
                          WIDEN)  # fmt: skip
    v, vs = _load_kv_tile(V, VS, page, n0, h, stride_vb, stride_vh, stride_vt, stride_vsb,
                          stride_vsh, d, ok, dmask, BLOCK_N, BLOCK_SIZE, QUANT, DTYPE,
                          WIDEN)  # fmt: skip
    return k, ks, v, vs


@triton.jit
def _tile_pages(bt, n0, hi, BLOCK_N: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """The pages (int32, as the table holds them) of the KV tile at positions n0 .. n0 +
    BLOCK_N of a block-table row `bt`: one scalar where a page holds whole tiles (BLOCK_SIZE a
    multiple of BLOCK_N; tiles start at multiples of BLOCK_N), read at the last position < hi
    for a tile past it; else one per position (0 from hi on)."""
    if BLOCK_SIZE % BLOCK_N == 0:
        page = tl.load(bt + tl.maximum(tl.minimum(n0, hi - 1), 0) // BLOCK_SIZE)
    else:
        n = n0 + tl.arange(0, BLOCK_N)
        page = tl.load(bt + n // BLOCK_SIZE, mask=n < hi, other=0)
    return page


@triton.jit
def _dot(a, b, IEEE: tl.constexpr):
    if IEEE:  # fp32 activations: exact fp32 products instead of tf32
        r = tl.dot(a, b, input_precision="ieee")
    else:
        r = tl.dot(a, b)
    return r


@triton.jit
def _online_softmax_step(
    q, k, ks, v, vs, visible, m_i, l_i, acc, qk_scale, QUANT: tl.constexpr, IEEE: tl.constexpr
):
    """One KV tile of flash attention in base 2: returns the updated (m_i, l_i, acc)."""
    s = _dot(q, tl.trans(k), IEEE)  # [BLOCK_M, BLOCK_N]
    if QUANT:
        s = s * ks[None, :]  # per-token K scale factors out of the dot product
    s = tl.where(visible, s * qk_scale, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # fully masked rows stay at 0
    alpha = tl.exp2(m_i - m_safe)
    prob = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(prob, axis=1)
    if QUANT:
        prob = prob * vs[None, :]  # per-token V scale folded into the probabilities
    acc = acc * alpha[:, None] + _dot(prob.to(v.dtype), v, IEEE)
    return m_new, l_i, acc


# the live-context rule's numbers are plain integers (no variant per value class: a decode
# graph of another batch size must not compile another kernel)
@triton.jit(do_not_specialize=["live_parts", "live_cap"])
def _attn_kernel(
    Q,
    K,
    V,
    KS,
    VS,
    BT,
    CU,
    SL,
    OUT,
    OUT_P,
    LSE_P,
    stride_qt,
    stride_qh,
    stride_kb,
    stride_kh,
    stride_kt,
    stride_vb,
    stride_vh,
    stride_vt,
    stride_ksb,
    stride_ksh,
    stride_vsb,
    stride_vsh,
    stride_bt,
    stride_ot,
    stride_oh,
    stride_pt,
    stride_ph,
    stride_pp,
    n_kv_heads,
    part_len,
    qk_scale,  # qk_scale = softmax scale * log2(e)
    CNT,
    XQ,
    XS,  # MERGE: zeroed int32 counters per row tile; OUT_QUANT: int8 out (quant_act)
    G: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    D_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    QUANT: tl.constexpr,
    SPLIT: tl.constexpr,
    IEEE: tl.constexpr,
    MERGE: tl.constexpr = False,
    OUT_QUANT: tl.constexpr = 0,
    PDL: tl.constexpr = False,
    live_parts=1,
    live_cap=1,
    PART_TILES: tl.constexpr = 8,
    MIN_PART: tl.constexpr = 1,
    MERGE_ROWS: tl.constexpr = 1,
    MERGE_PARTS: tl.constexpr = 1,
    PREFETCH: tl.constexpr = False,
    WIDEN: tl.constexpr = 0,
    KDOT: tl.constexpr = 0,
    EMU: tl.constexpr = False,
):
    # the step's inputs (cu_seqlens, seq_lens, the block table of the first KV tile: uploaded
    # before its first kernel) are read before the PDL wait; q and the KV cache (with this
    # step's tokens, just stored) after it
    pdl_trigger(PDL)
    TOK: tl.constexpr = BLOCK_M // G
    b = tl.program_id(1) // n_kv_heads
    h = tl.program_id(1) % n_kv_heads
    p = tl.program_id(2)
    q_start = tl.load(CU + b)
    q_len = tl.load(CU + b + 1) - q_start
    seq_len = tl.load(SL + b)
    m = tl.arange(0, BLOCK_M)
    qi = tl.program_id(0) * TOK + m // G  # [BLOCK_M] query index within the sequence
    head = h * G + m % G  # [BLOCK_M] query head
    rows = (m < TOK * G) & (qi < q_len)
    d = tl.arange(0, D_PAD)
    dmask = d < HEAD_DIM
    tok = (q_start + qi).to(tl.int64)
    qpos = seq_len - q_len + qi  # [BLOCK_M] absolute position of each query row
    # the live context over every partition of the grid, in whole KV tiles: the shortest
    # partition a split launch takes (dropped by the compiler where unused)
    least = tl.cdiv(tl.cdiv(seq_len, tl.num_programs(2)), BLOCK_N) * BLOCK_N
    if MERGE:  # decode: partitions sized to the live context, not to the longest one a CUDA
        # graph may see (`paged_triton.live_partitions`): a quarter of it (>= one KV tile) up
        # to the planned length, spread over what the planner would plan for it (`_spread`:
        # live_parts from the wave rule and its floor for serial programs, one per PART_TILES
        # tiles up to live_cap for long contexts), and never fewer than the grid needs (H200,
        # batch 1, 8B heads: 129 tokens 7.4 vs 8.1 us, 256 tokens 7.8 vs 9.8 us)
        quarter = tl.maximum(tl.cdiv(tl.cdiv(seq_len, 4), BLOCK_N), 1) * BLOCK_N
        long = tl.minimum(tl.cdiv(seq_len, PART_TILES * BLOCK_N), live_cap)
        want = tl.maximum(live_parts, long)
        spread = tl.maximum(tl.cdiv(tl.cdiv(seq_len, want), BLOCK_N), 1) * BLOCK_N
        part_len = tl.maximum(tl.minimum(tl.minimum(quarter, part_len), spread), least)
    elif SPLIT:  # a prefill chunk over a split KV (merged by `_merge_kernel`): the live context
        # spread over the launch's partitions, MIN_PART tokens each at least, as `plan_launch`
        # splits a context of its own length; a CUDA graph plans for its window (max_model_len),
        # where a 4,000-token context of a 32K window would sit in one partition of four
        part_len = tl.minimum(part_len, tl.maximum(least, tl.cdiv(MIN_PART, BLOCK_N) * BLOCK_N))
    lo = p * part_len
    last = tl.minimum(tl.program_id(0) * TOK + TOK, q_len)  # causal bound of this row tile
    hi = tl.minimum(tl.minimum(seq_len, lo + part_len), seq_len - q_len + last)
    hi = tl.where(tl.program_id(0) * TOK < q_len, hi, lo)  # a tile without query rows: no work
    # the pages of each KV tile are loaded one tile ahead, the first before the wait
    bt = BT + b.to(tl.int64) * stride_bt
    page_next = _tile_pages(bt, lo, hi, BLOCK_N, BLOCK_SIZE)
    if PREFETCH:  # the loop loads KV one tile ahead: the second tile's pages too
        page_2 = _tile_pages(bt, lo + BLOCK_N, hi, BLOCK_N, BLOCK_SIZE)
    pdl_wait(PDL)
    q = tl.load(
        Q + tok[:, None] * stride_qt + head[:, None] * stride_qh + d[None, :],
        mask=rows[:, None] & dmask[None, :],
        other=0.0,
    )  # [BLOCK_M, D_PAD]
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D_PAD], tl.float32)
    if KDOT > 0:  # one query row (row 0) to int8 words and its per-32 scales (`_q_words`)
        qw, dq = _q_words(tl.sum(tl.where(m[:, None] == 0, q.to(tl.float32), 0.0), axis=0), D_PAD)
    if PREFETCH:  # the tile in registers, in the cache's dtype (converted when used)
        k_r, ks_r, v_r, vs_r = _kv_tile(K, V, KS, VS, page_next, lo, hi, h, stride_kb, stride_kh,
                                        stride_kt, stride_vb, stride_vh, stride_vt, stride_ksb,
                                        stride_ksh, stride_vsb, stride_vsh, d, dmask, BLOCK_N,
                                        BLOCK_SIZE, QUANT, K.dtype.element_ty, 0)  # fmt: skip
        page_next = page_2
    for n0 in range(lo, hi, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)  # [BLOCK_N] KV positions
        n_ok = n < hi
        if KDOT > 0:  # one query row over int8 KV: Q K^T by dp4a (`_kdot_step`)
            page = page_next.to(tl.int64)
            page_next = _tile_pages(bt, n0 + BLOCK_N, hi, BLOCK_N, BLOCK_SIZE)
            m_i, l_i, acc = _kdot_step(K, V, KS, VS, page, n % BLOCK_SIZE, n_ok, h, qw, dq, m,
                                       m_i, l_i, acc, qk_scale, stride_kb, stride_kh, stride_kt,
                                       stride_vb, stride_vh, stride_vt, stride_ksb, stride_ksh,
                                       stride_vsb, stride_vsh, d, Q.dtype.element_ty, D_PAD,
                                       KDOT, WIDEN, EMU)  # fmt: skip
        else:
            if PREFETCH:  # next tile's KV in flight while this one computes, pages a tile further
                k_n, ks_n, v_n, vs_n = _kv_tile(K, V, KS, VS, page_next, n0 + BLOCK_N, hi, h,
                                                stride_kb, stride_kh, stride_kt, stride_vb,
                                                stride_vh, stride_vt, stride_ksb, stride_ksh,
                                                stride_vsb, stride_vsh, d, dmask, BLOCK_N,
                                                BLOCK_SIZE, QUANT, K.dtype.element_ty,
                                                0)  # fmt: skip
                page_next = _tile_pages(bt, n0 + 2 * BLOCK_N, hi, BLOCK_N, BLOCK_SIZE)
                k = _widen(k_r, Q.dtype.element_ty, WIDEN)
                v = _widen(v_r, Q.dtype.element_ty, WIDEN)
                ks, vs = ks_r, vs_r
                k_r, ks_r, v_r, vs_r = k_n, ks_n, v_n, vs_n
            else:
                page = page_next
                page_next = _tile_pages(bt, n0 + BLOCK_N, hi, BLOCK_N, BLOCK_SIZE)
                k, ks, v, vs = _kv_tile(K, V, KS, VS, page, n0, hi, h, stride_kb, stride_kh,
                                        stride_kt, stride_vb, stride_vh, stride_vt, stride_ksb,
                                        stride_ksh, stride_vsb, stride_vsh, d, dmask, BLOCK_N,
                                        BLOCK_SIZE, QUANT, Q.dtype.element_ty, WIDEN)  # fmt: skip
            visible = n_ok[None, :] & (n[None, :] <= qpos[:, None])  # [BLOCK_M, BLOCK_N]
            m_i, l_i, acc = _online_softmax_step(
                q, k, ks, v, vs, visible, m_i, l_i, acc, qk_scale, QUANT, IEEE
            )
    o = acc / tl.maximum(l_i, 1e-30)[:, None]  # rows that saw no key (l_i = 0) output zeros
    omask = rows[:, None] & dmask[None, :]
    if MERGE:  # decode split-KV, merged here: the partitions that hold keys of this sequence
        n_act = tl.maximum(tl.cdiv(seq_len, part_len), 1)
        if p < n_act:
            if n_act == 1:  # one partition: its result is the output
                _store_out(o, OUT, XQ, XS, tok, head, d, rows, omask, stride_ot, stride_oh,
                           G * n_kv_heads, HEAD_DIM, OUT_QUANT)  # fmt: skip
            else:
                pbase = tok * stride_pt + head * stride_ph + p * stride_pp  # [BLOCK_M]
                tl.store(OUT_P + pbase[:, None] * HEAD_DIM + d[None, :], o, mask=omask)
                lse = tl.where(l_i > 0, m_i + tl.log2(tl.maximum(l_i, 1e-30)), float("-inf"))
                tl.store(LSE_P + pbase, lse, mask=rows)
                # the last partition to finish merges (release ours, acquire the others')
                tl.debug_barrier()
                cnt = CNT + tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
                if tl.atomic_add(cnt, 1, sem="acq_rel", scope="gpu") == n_act - 1:
                    # the merge takes the tile's first MERGE_ROWS rows (those that can hold
                    # queries) and MERGE_PARTS partitions per round trip
                    mm = tl.arange(0, MERGE_ROWS)
                    mqi = tl.program_id(0) * TOK + mm // G
                    mhead = h * G + mm % G
                    mrows = (mm < TOK * G) & (mqi < q_len)
                    mtok = (q_start + mqi).to(tl.int64)
                    momask = mrows[:, None] & dmask[None, :]
                    out = _merge_parts(OUT_P, LSE_P, mtok * stride_pt + mhead * stride_ph, d,
                                       mrows, n_act, stride_pp, HEAD_DIM, MERGE_PARTS)  # fmt: skip
                    _store_out(out, OUT, XQ, XS, mtok, mhead, d, mrows, momask, stride_ot,
                               stride_oh, G * n_kv_heads, HEAD_DIM, OUT_QUANT)  # fmt: skip
                    # zero for the next launch (and graph replay): relaxed, no fence on the
                    # tail (the launch boundary orders it before the next increments)
                    tl.atomic_xchg(cnt, 0, sem="relaxed")
    elif SPLIT:
        pbase = tok * stride_pt + head * stride_ph + p * stride_pp  # [BLOCK_M]
        tl.store(OUT_P + pbase[:, None] * HEAD_DIM + d[None, :], o, mask=omask)
        lse = tl.where(l_i > 0, m_i + tl.log2(tl.maximum(l_i, 1e-30)), float("-inf"))
        tl.store(LSE_P + pbase, lse, mask=rows)
    else:
        optr = OUT + tok[:, None] * stride_ot + head[:, None] * stride_oh + d[None, :]
        tl.store(optr, o.to(OUT.dtype.element_ty), mask=omask)


@triton.jit
def _q_words(q0, D: tl.constexpr):
    """One query row q0 [D] (fp32) -> (its int8 values as int32 words [D / 4], byte j of word w
    = element 4 w + j; the scale of each 32 elements [D / 32]): rounded as `quant_act` rounds."""
    qg = tl.reshape(q0, [D // 32, 32])
    amax = tl.max(tl.abs(qg), axis=1)
    inv = tl.where(amax > 0, 127.0 / amax, 0.0)
    qi = tl.minimum(tl.maximum(tl.floor(qg * inv[:, None] + 0.5), -127.0), 127.0).to(tl.int32)
    qb = tl.reshape(qi, [D // 4, 4]) & 255
    return tl.sum(qb << (8 * tl.arange(0, 4))[None, :], axis=1), amax / 127.0


@triton.jit
def _kdot_step(K, V, KS, VS, page, off, ok, h, qw, dq, m, m_i, l_i, acc, qk_scale, stride_kb,
               stride_kh, stride_kt, stride_vb, stride_vh, stride_vt, stride_ksb, stride_ksh,
               stride_vsb, stride_vsh, d, DTYPE: tl.constexpr, D: tl.constexpr,
               KDOT: tl.constexpr, WIDEN: tl.constexpr, EMU: tl.constexpr):  # fmt: skip
    """One KV tile of one query row (row 0 of the [BLOCK_M, D] state) over int8 K / V: each
    key's score is D / 4 `dp4a` of its raw words with the query's (`_q_words`), scaled per 32
    elements and by the key's scale, no widening; P V on the tensor cores with V widened and P
    in DTYPE (KDOT 1), or V as it is and P quantized to int8 per tile (KDOT 2: P to 8 bits).
    Returns the updated (m_i, l_i, acc)."""
    off = off.to(tl.int64)
    kbase = page * stride_kb + h * stride_kh + off * stride_kt  # [BLOCK_N] bytes
    kw = tl.load(K.to(tl.pointer_type(tl.int32)) + (kbase // 4)[:, None]
                 + tl.arange(0, D // 4)[None, :], mask=ok[:, None], other=0)  # fmt: skip
    prod = dp4a(tl.zeros_like(kw), kw, qw[None, :] + kw * 0, EMU, True)  # [BLOCK_N, D / 4]
    sg = tl.sum(tl.reshape(prod, [kw.shape[0], D // 32, 8]), axis=2)  # [BLOCK_N, D / 32]
    s = tl.sum(sg.to(tl.float32) * dq[None, :], axis=1)  # [BLOCK_N]
    ks = tl.load(KS + page * stride_ksb + h * stride_ksh + off, mask=ok, other=0.0)
    s = tl.where(ok, s * ks * qk_scale, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=0))  # [BLOCK_M], every row the same
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    pr = tl.exp2(s - tl.max(m_safe, axis=0))  # [BLOCK_N]
    l_i = l_i * alpha + tl.sum(pr, axis=0)
    vs = tl.load(VS + page * stride_vsb + h * stride_vsh + off, mask=ok, other=0.0)
    w = pr * vs
    vt = tl.load(V + (page * stride_vb + h * stride_vh + off * stride_vt)[:, None] + d[None, :],
                 mask=ok[:, None], other=0)  # int8 [BLOCK_N, D]  # fmt: skip
    if KDOT == 1:
        p16 = tl.where(m[:, None] == 0, w[None, :], 0.0).to(DTYPE)
        acc = acc * alpha[:, None] + tl.dot(p16, _widen(vt, DTYPE, WIDEN))
    else:
        wmax = tl.max(w, axis=0)
        wq = tl.floor(w * tl.where(wmax > 0, 127.0 / wmax, 0.0) + 0.5)
        p8 = tl.where(m[:, None] == 0, wq[None, :], 0.0).to(tl.int8)
        part = tl.dot(p8, vt, out_dtype=tl.int32).to(tl.float32) * (wmax / 127.0)
        acc = acc * alpha[:, None] + part
    return m_new, l_i, acc


@triton.jit
def _merge_load(OUT_P, LSE_P, base, d, rows, p, n_parts, stride_pp, HEAD_DIM: tl.constexpr):
    """Partition p's (lse [R], out [R, D_PAD]) of rows `base` [R]; -inf / 0 past n_parts (read
    past L1: other programs wrote them)."""
    pb = base + p * stride_pp  # [R]
    ok = rows & (pb * 0 + p < n_parts)  # scalar masks trip the interpreter
    lse = tl.load(LSE_P + pb, mask=ok, other=float("-inf"), cache_modifier=".cg")
    o = tl.load(OUT_P + pb[:, None] * HEAD_DIM + d[None, :],
                mask=ok[:, None] & (d < HEAD_DIM)[None, :], other=0.0,
                cache_modifier=".cg")  # fmt: skip
    return lse, o


@triton.jit
def _merge_add(mx, den, acc, lse, o):
    """One partition into the running log-sum-exp merge (mx, den, acc)."""
    m_new = tl.maximum(mx, lse)
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    a = tl.exp2(mx - m_safe)
    w = tl.exp2(lse - m_safe)  # 0 for a partition without keys
    return m_new, den * a + w, acc * a[:, None] + w[:, None] * o


@triton.jit
def _merge_parts(OUT_P, LSE_P, base, d, rows, n_parts, stride_pp, HEAD_DIM: tl.constexpr,
                 PC: tl.constexpr):  # fmt: skip
    """Log-sum-exp merge [R, D_PAD] of partitions 0..n_parts-1 of rows `base` [R]. PC (1, 2,
    4 or 8) partitions per step, their loads issued before any of them is used: n_parts
    partitions cost cdiv(n_parts, PC) dependent L2 round trips, not n_parts (one after the
    other, each partition added ~0.3 us on an H100: llama3-8b at 4,161 tokens ran 21.5 us over
    33 partitions, 31.7 us over 66)."""
    mx = tl.full(base.shape, float("-inf"), tl.float32)  # [R]
    den = tl.zeros(base.shape, tl.float32)
    acc = tl.zeros([base.shape[0], d.shape[0]], tl.float32)  # [R, D_PAD]
    for p in range(0, n_parts, PC):
        l0, o0 = _merge_load(OUT_P, LSE_P, base, d, rows, p, n_parts, stride_pp, HEAD_DIM)
        l1, o1, l2, o2, l3, o3 = l0, o0, l0, o0, l0, o0
        l4, o4, l5, o5, l6, o6, l7, o7 = l0, o0, l0, o0, l0, o0, l0, o0
        if PC > 1:
            l1, o1 = _merge_load(OUT_P, LSE_P, base, d, rows, p + 1, n_parts, stride_pp, HEAD_DIM)
        if PC > 2:
            l2, o2 = _merge_load(OUT_P, LSE_P, base, d, rows, p + 2, n_parts, stride_pp, HEAD_DIM)
            l3, o3 = _merge_load(OUT_P, LSE_P, base, d, rows, p + 3, n_parts, stride_pp, HEAD_DIM)
        if PC > 4:
            l4, o4 = _merge_load(OUT_P, LSE_P, base, d, rows, p + 4, n_parts, stride_pp, HEAD_DIM)
            l5, o5 = _merge_load(OUT_P, LSE_P, base, d, rows, p + 5, n_parts, stride_pp, HEAD_DIM)
            l6, o6 = _merge_load(OUT_P, LSE_P, base, d, rows, p + 6, n_parts, stride_pp, HEAD_DIM)
            l7, o7 = _merge_load(OUT_P, LSE_P, base, d, rows, p + 7, n_parts, stride_pp, HEAD_DIM)
        mx, den, acc = _merge_add(mx, den, acc, l0, o0)
        if PC > 1:
            mx, den, acc = _merge_add(mx, den, acc, l1, o1)
        if PC > 2:
            mx, den, acc = _merge_add(mx, den, acc, l2, o2)
            mx, den, acc = _merge_add(mx, den, acc, l3, o3)
        if PC > 4:
            mx, den, acc = _merge_add(mx, den, acc, l4, o4)
            mx, den, acc = _merge_add(mx, den, acc, l5, o5)
            mx, den, acc = _merge_add(mx, den, acc, l6, o6)
            mx, den, acc = _merge_add(mx, den, acc, l7, o7)
    return acc / tl.maximum(den, 1e-30)[:, None]


@triton.jit
def _store_out(o, OUT, XQ, XS, tok, head, d, rows, omask, stride_ot, stride_oh, n_heads,
               HEAD_DIM: tl.constexpr, OUT_QUANT: tl.constexpr):  # fmt: skip
    """Rows of the output [BLOCK_M, D_PAD]; with OUT_QUANT (one token, HEAD_DIM == D_PAD, a
    multiple of 32) also their int8 form as one [Hq D] row per token (quant_act)."""
    y = o.to(OUT.dtype.element_ty)
    tl.store(OUT + tok[:, None] * stride_ot + head[:, None] * stride_oh + d[None, :], y, mask=omask)
    if OUT_QUANT > 0:
        BM: tl.constexpr = y.shape[0]
        yg = tl.reshape(y.to(tl.float32), [BM, HEAD_DIM // 32, 32])
        e = tl.arange(0, 32)
        if OUT_QUANT == 2:  # "w8": element 16 h + 4 s + w -> byte 16 h + 4 w + s
            pb = 16 * (e // 16) + 4 * (e % 4) + (e // 4) % 4
        else:  # "w4": element 8 j + 4 t + w -> byte 16 t + 4 w + j
            pb = 16 * ((e // 4) % 2) + 4 * (e % 4) + e // 8
        k = n_heads * HEAD_DIM
        g = head[:, None] * (HEAD_DIM // 32) + tl.arange(0, HEAD_DIM // 32)[None, :]  # [BM, D/32]
        gmask = rows[:, None] & (g >= 0)
        amax = tl.max(tl.abs(yg), axis=2)
        inv = tl.where(amax > 0, 127.0 / amax, 0.0)
        q = tl.minimum(tl.maximum(tl.floor(yg * inv[:, :, None] + 0.5), -127.0), 127.0)
        tl.store(XQ + tok[:, None, None] * k + g[:, :, None] * 32 + pb[None, None, :],
                 q.to(tl.int8), mask=gmask[:, :, None])  # fmt: skip
        dx = amax / 127.0
        s_all = tl.sum(q, axis=2)
        s_lo = tl.sum(tl.where(e[None, None, :] < 16, q, 0.0), axis=2)
        xs = XS + (tok[:, None] * (k // 32) + g) * 4
        tl.store(xs, dx, mask=gmask)
        tl.store(xs + 1, dx * s_all, mask=gmask)
        tl.store(xs + 2, dx * s_lo, mask=gmask)
        tl.store(xs + 3, dx * (s_all - s_lo), mask=gmask)


@triton.jit
def _merge_kernel(
    OUT_P,
    LSE_P,
    OUT,  # OUT_P [T, Hq, P, D] fp32, LSE_P [T, Hq, P] fp32 (log2 units)
    XQ,
    XS,  # QUANT > 0: the int8 form of OUT as one row [Hq D] per token (quant_act)
    stride_pt,
    stride_ph,
    stride_ot,
    stride_oh,
    n_parts,
    n_heads,
    HEAD_DIM: tl.constexpr,
    D_PAD: tl.constexpr,
    P_PAD: tl.constexpr,
    QUANT: tl.constexpr,
    PDL: tl.constexpr = False,
):
    pdl_enter(PDL)
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    p = tl.arange(0, P_PAD)
    d = tl.arange(0, D_PAD)
    pmask = p < n_parts
    base = t * stride_pt + h * stride_ph + p  # [P_PAD] (partition stride is 1)
    lse = tl.load(LSE_P + base, mask=pmask, other=float("-inf"))
    mx = tl.max(lse, axis=0)
    mx = tl.where(mx == float("-inf"), 0.0, mx)
    w = tl.exp2(lse - mx)  # [P_PAD]; 0 for empty partitions
    o = tl.load(
        OUT_P + base[:, None] * HEAD_DIM + d[None, :],
        mask=pmask[:, None] & (d < HEAD_DIM)[None, :],
        other=0.0,
    )  # [P_PAD, D_PAD]
    den = tl.sum(w, axis=0)
    out = tl.sum(w[:, None] * o, axis=0) / tl.maximum(den, 1e-30)
    y = out.to(OUT.dtype.element_ty)
    tl.store(OUT + t * stride_ot + h * stride_oh + d, y, mask=d < HEAD_DIM)
    if QUANT > 0:  # HEAD_DIM == D_PAD, a multiple of 32: a head's groups are its own
        k = n_heads * HEAD_DIM
        _quant_store(y.to(tl.float32), h * HEAD_DIM, k, XQ + t * k, XS + t * (k // 32) * 4, D_PAD,
                     QUANT == 2)  # fmt: skip
