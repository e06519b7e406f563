"""Output projection + residual add + RMSNorm as one op (`fused/linear_norm`): the Triton
decode-token launch (interpreter on CPU, small shapes) leaves the norm pending, and every GEMV
that reads it (dp4a, dp4a + RoPE) must give what the unfused ops give."""

from __future__ import annotations

import pytest
import torch
from gguf import GGMLQuantizationType as QT
from test_kernels_qlinear import KERNEL_QTYPES, random_raw

from localllm.kernels.fused.linear_norm import linear_add_rms_norm as linear_add_rms_norm_ref
from localllm.kernels.fused.quant_act import QAct, plain
from localllm.kernels.linear.qlinear import pack_weight

pytest.importorskip("triton")
from localllm.kernels.fused.linear_norm_triton import linear_add_rms_norm  # noqa: E402
from localllm.kernels.fused.norm_triton import add_rms_norm  # noqa: E402
from localllm.kernels.linear import dp4a_triton as dp  # noqa: E402
from localllm.kernels.linear.qlinear_triton import qlinear_triton  # noqa: E402
from localllm.kernels.quant import kernel_facts  # noqa: E402
from localllm.kernels.scratch import ZeroScratch  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
DT = torch.float16 if DEV == "cuda" else torch.float32


def _w(qtype: QT, n: int, k: int, seed: int):
    return pack_weight(random_raw(qtype, n, k, seed=seed, scale=0.05), DEV)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


@pytest.mark.parametrize("qtype", [QT.Q4_K, QT.Q6_K, QT.Q4_0, QT.Q8_0])
def test_fused_projection_norm_matches_composed_ops(qtype: QT) -> None:
    """One token: the fused launch's residual equals qlinear + add exactly; its pending norm,
    read by the next GEMV (of each int8 layout), matches the composed add_rms_norm + GEMV to
    the int8 rounding; materialized, x equals add_rms_norm's output; counters end at zero."""
    fmt = KERNEL_QTYPES[qtype]
    k, n = 256, 256
    wo = _w(qtype, n, k, 1)
    nxt = {lay: _w(q, 64, n, 2) for q, lay in ((QT.Q4_K, "w4"), (QT.Q8_0, "w8"))}
    layout = kernel_facts(fmt).act_layout
    x = QAct(torch.randn(1, k, device=DEV, dtype=DT))
    residual = torch.randn(1, n, device=DEV, dtype=DT) * 4
    norm_w = torch.rand(n, device=DEV, dtype=DT) + 0.5
    for out_layout, w_next in nxt.items():
        fused, r = linear_add_rms_norm(QAct(x.x), wo, residual, norm_w, 1e-5, quant=out_layout)
        assert isinstance(fused, QAct) and fused.norm is not None and fused._x is None
        assert fused.shape == (1, n) and fused.dtype == DT and fused.pending(out_layout) is not None
        h = qlinear_triton(QAct(x.x), wo)
        assert torch.equal(r, (h.float() + residual.float()).to(DT))
        want_x, want_r = add_rms_norm(h, residual, norm_w, 1e-5, quant=out_layout)
        assert torch.equal(r, want_r)
        got = qlinear_triton(fused, w_next)  # reads the pending int8 form
        assert fused._x is None  # ... without materializing x
        want = qlinear_triton(want_x, w_next)
        assert _rel(got, want) < 2e-2, (fmt, out_layout)
        torch.testing.assert_close(fused.x, plain(want_x), atol=2e-3, rtol=2e-3)
        # a GEMV of the other layout quantizes the materialized x: final, not pending
        other = "w8" if out_layout == "w4" else "w4"
        assert fused.pending(other) is None
        assert _rel(qlinear_triton(fused, nxt[other]), qlinear_triton(want_x, nxt[other])) < 2e-2
    ref_x, ref_r = linear_add_rms_norm_ref(x, wo, residual, norm_w, 1e-5)
    assert _rel(r, ref_r) < 2e-2 and _rel(plain(fused), ref_x) < 3e-2
    assert layout in ("w4", "w8")
    for buf in dp._GROUP_COUNTERS.buffers():
        assert not buf.any()


def test_pending_norm_feeds_the_rope_gemv() -> None:
    """QKV + RoPE + KV store reading a pending norm equals it reading add_rms_norm's output."""
    from localllm.kernels.fused.qkv_rope import Heads
    from localllm.kernels.fused.qkv_rope_triton import qkv_rope_store

    d, hq, hkv, k = 32, 4, 2, 256
    heads = Heads(hq, hkv, d, False)
    wqkv = [_w(QT.Q4_K, (hq + 2 * hkv) * d, k, 3)]
    wo = _w(QT.Q4_K, k, 256, 4)
    x = torch.randn(1, 256, device=DEV, dtype=DT)
    residual = torch.randn(1, k, device=DEV, dtype=DT)
    norm_w = torch.rand(k, device=DEV, dtype=DT) + 0.5
    cos_sin = torch.randn(16, d, device=DEV)
    pos = torch.tensor([5], device=DEV)
    slots = torch.tensor([3], device=DEV)

    def run(a: QAct) -> tuple[torch.Tensor, torch.Tensor]:
        kc, vc = (torch.zeros(2, hkv, 4, d, device=DEV, dtype=DT) for _ in range(2))
        out = qkv_rope_store(a, wqkv, None, heads, pos, cos_sin, kc, vc, None, None, slots)
        return out, kc

    fused, _ = linear_add_rms_norm(QAct(x), wo, residual, norm_w, 1e-5, quant="w4")
    assert isinstance(fused, QAct) and fused.norm is not None
    got, got_k = run(fused)
    assert fused._x is None
    want_x, _ = add_rms_norm(qlinear_triton(QAct(x), wo), residual, norm_w, 1e-5, quant="w4")
    want, want_k = run(want_x)
    assert _rel(got, want) < 2e-2 and _rel(got_k, want_k) < 2e-2


def test_composes_when_not_fusable() -> None:
    """Several rows, float x, no int8 layout wanted: the composed ops, plain tensors out."""
    wo = _w(QT.Q4_K, 64, 256, 5)
    residual = torch.randn(3, 64, device=DEV, dtype=DT)
    norm_w = torch.ones(64, device=DEV, dtype=DT)
    x = torch.randn(3, 256, device=DEV, dtype=DT)
    out, r = linear_add_rms_norm(x, wo, residual, norm_w, 1e-5, quant="w4")
    want, want_r = add_rms_norm(qlinear_triton(x, wo), residual, norm_w, 1e-5, quant="w4")
    assert torch.equal(r, want_r) and torch.equal(plain(out), plain(want))
    one, _ = linear_add_rms_norm(QAct(x[:1]), wo, residual[:1], norm_w, 1e-5, quant=None)
    assert not isinstance(one, QAct) or one.norm is None


def test_norm_fusable_needs_whole_groups_and_no_split() -> None:
    assert dp.norm_fusable(dp.Dp4aConfig(2, 1, 2), "q4_k", 4096, 4096)
    assert not dp.norm_fusable(dp.Dp4aConfig(2, 1, 2), "q4_k", 4100, 4096)  # N % 32
    assert not dp.norm_fusable(dp.Dp4aConfig(2, 1, 1, split=2), "q4_k", 4096, 4096)
    assert isinstance(dp._GROUP_COUNTERS, ZeroScratch)


def test_pending_norm_through_a_k_split() -> None:
    """A GEMV whose config splits K (short matrices on many SMs) scales each split's partial:
    the same result as the one-program launch."""
    n = 2048  # 64 groups: 2 K steps of one warp, split in 2
    wo, w_next = _w(QT.Q4_K, n, 256, 6), _w(QT.Q4_K, 32, n, 7)
    residual = torch.randn(1, n, device=DEV, dtype=DT)
    norm_w = torch.rand(n, device=DEV, dtype=DT) + 0.5
    fused, _ = linear_add_rms_norm(QAct(torch.randn(1, 256, device=DEV, dtype=DT)), wo,
                                   residual, norm_w, 1e-5, quant="w4")  # fmt: skip
    assert isinstance(fused, QAct) and fused.norm is not None
    xq, xs = fused.q["w4"]
    planes = [w_next.tensors[p] for p in kernel_facts("q4_k").planes]
    pending = (fused.norm.ss, fused.norm.eps)
    one, split = (dp.dp4a_launch(xq, xs, planes, "q4_k", 32, None, cfg, torch.float32, pending)
                  for cfg in (dp.Dp4aConfig(2, 1, 1), dp.Dp4aConfig(2, 1, 1, split=2)))  # fmt: skip
    assert dp.split_groups(dp.Dp4aConfig(2, 1, 1, split=2), n // 32)[2] == 2
    torch.testing.assert_close(split, one, rtol=1e-4, atol=1e-4)
    want = qlinear_triton(plain(fused), w_next, out_dtype=torch.float32)
    assert _rel(one, want) < 2e-2


def test_whole_group_programs_match_the_last_of_group_path() -> None:
    """Programs of whole groups (BN 32, 64: no counters) emit what the last-of-group path of
    narrow programs (BN 2, 4) emits: the same residual, sums of squares and int8 form."""
    n, k = 128, 256
    w = _w(QT.Q4_K, n, k, 8)
    planes = [w.tensors[p] for p in kernel_facts("q4_k").planes]
    x = QAct(torch.randn(1, k, device=DEV, dtype=DT))
    qlinear_triton(x, w)  # quantizes x on first use
    xq, xs = x.q["w4"]
    residual = torch.randn(1, n, device=DEV, dtype=DT)
    norm_w = torch.rand(n, device=DEV, dtype=DT) + 0.5
    outs = [dp.dp4a_norm_launch(xq, xs, planes, "q4_k", dp.Dp4aConfig(bn, 1, warps), residual,
                                norm_w, "w4")
            for bn, warps in ((2, 2), (4, 1), (32, 4), (64, 2))]  # fmt: skip
    for got in outs[1:]:
        for a, b in zip(got, outs[0], strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert not dp.norm_fusable(dp.Dp4aConfig(64, 1, 2), "q4_k", 96, k)  # 96 % 64
    assert dp.norm_fusable(dp.Dp4aConfig(32, 1, 2), "q4_k", 96, k)
