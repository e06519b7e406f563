"""The int8-activation quantizer and the dp4a GEMV: quantizer vs its torch reference, the
GEMV vs a float matmul of the same quantized activations and the dequantized weights (CPU:
interpreter with small shapes; GPU: 7-8B shapes), and the end-to-end error vs fp32 x."""

from __future__ import annotations

import pytest
import torch
from gguf import GGMLQuantizationType as QT
from test_kernels_qlinear import KERNEL_QTYPES, random_raw

from localllm.kernels.fused.quant_act import GROUP, dequant_act, element_of_byte, quant_act_ref
from localllm.kernels.linear.qlinear import dequantize_weight, pack_weight

pytest.importorskip("triton")
from localllm.kernels.fused.quant_act_triton import quant_act_triton  # noqa: E402
from localllm.kernels.linear import dp4a_triton as dp  # noqa: E402
from localllm.kernels.plan import DP4A_MAX_T, int8_rows  # noqa: E402
from localllm.kernels.quant import kernel_facts  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("layout", ["w4", "w8"])
def test_byte_order_is_a_permutation(layout: str) -> None:
    assert sorted(element_of_byte(layout).tolist()) == list(range(GROUP))


@pytest.mark.parametrize("layout", ["w4", "w8"])
def test_quant_act_reference_roundtrip(layout: str) -> None:
    x = torch.randn(3, 256) * torch.linspace(0.1, 10, 256)
    x[1, :32] = 0.0  # an all-zero group: scale 0, values 0
    xq, xs = quant_act_ref(x, layout)
    assert xq.dtype == torch.int8 and xs.shape == (3, 8, 4)
    assert int(xq.abs().max()) == 127
    back = dequant_act(xq, xs, layout)
    step = xs[:, :, :1].repeat_interleave(GROUP, dim=1).reshape(3, 256)
    assert torch.all((back - x).abs() <= step / 2 + 1e-6)
    assert torch.all(back[1, :32] == 0) and torch.all(xs[1, 0] == 0)
    # the sums: dx * sum(q) over the group and its element halves 0..15 / 16..31
    q = back / step.clamp_min(1e-30)
    g = q.reshape(3, 8, 32).round()
    torch.testing.assert_close(xs[..., 1], xs[..., 0] * g.sum(-1))
    torch.testing.assert_close(xs[..., 2], xs[..., 0] * g[..., :16].sum(-1))
    torch.testing.assert_close(xs[..., 3], xs[..., 0] * g[..., 16:].sum(-1))


@pytest.mark.parametrize("layout", ["w4", "w8"])
def test_quant_act_triton_matches_reference(layout: str) -> None:
    x = (torch.randn(2, 512) * 3).to(DEV)
    if DEV == "cuda":
        x = x.half()
    q, s = quant_act_triton(x, layout)
    rq, rs = quant_act_ref(x, layout)
    # fp32 rounding of x / dx may differ in the last bit on the GPU: then one step apart
    assert (q.int() - rq.int()).abs().max() <= 1
    assert (q != rq).float().mean() < 1e-3
    torch.testing.assert_close(s[..., 0], rs[..., 0])
    torch.testing.assert_close(s[..., 1:], rs[..., 1:], atol=rs[..., :1].max().item() * 2, rtol=0)


def _check(qtype: QT, n: int, k: int, cfg: dp.Dp4aConfig, t: int = 1, bias: bool = False) -> None:
    fmt = KERNEL_QTYPES[qtype]
    w = pack_weight(random_raw(qtype, n, k, seed=n + k), DEV)
    x = torch.randn(t, k, device=DEV)
    layout = kernel_facts(fmt).act_layout
    xq, xs = quant_act_ref(x, layout)
    b = torch.randn(n, device=DEV) if bias else None
    planes = [w.tensors[p] for p in kernel_facts(fmt).planes]
    out = dp.dp4a_launch(xq, xs, planes, fmt, n, b, cfg, torch.float32)
    ref = dequant_act(xq, xs, layout).double() @ dequantize_weight(w).double().t()
    if b is not None:
        ref += b.double()
    err = (out.double() - ref).abs().max() / ref.abs().max()
    assert err < 1e-5, (fmt, cfg, float(err))


CONFIGS = [dp.Dp4aConfig(4, 1, 1), dp.Dp4aConfig(2, 1, 1, split=3), dp.Dp4aConfig(8, 2, 1)]


@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
@pytest.mark.parametrize("qtype", list(KERNEL_QTYPES), ids=lambda q: q.name)
def test_dp4a_matches_reference(qtype: QT, cfg: dp.Dp4aConfig) -> None:
    # 11 weight rows: a partial row block; K = 768: a partial K step (masked groups); 3
    # activation rows: one multi-row program
    _check(qtype, 11, 768, cfg, t=3, bias=cfg.split > 1)


@pytest.mark.parametrize("t", [2, 8, 11])
@pytest.mark.parametrize("qtype", [QT.Q4_K, QT.Q6_K], ids=lambda q: q.name)
def test_dp4a_rows_equal_one_row_launches(qtype: QT, t: int) -> None:
    """Several activation rows per program (one weight-tile read for all) give each row
    bit for bit what a one-row launch gives it (speculative verification and plain decode
    then take the same tokens); 11 rows: two blocks of 6, the last with a row past T."""
    fmt = KERNEL_QTYPES[qtype]
    w = pack_weight(random_raw(qtype, 10, 512, seed=t), DEV)
    planes = [w.tensors[p] for p in kernel_facts(fmt).planes]
    xq, xs = quant_act_ref(torch.randn(t, 512, device=DEV), kernel_facts(fmt).act_layout)
    b = torch.randn(10, device=DEV)
    cfg = dp.Dp4aConfig(4, 1, 1)
    out = dp.dp4a_launch(xq, xs, planes, fmt, 10, b, cfg, torch.float32)
    rows = [dp.dp4a_launch(xq[i : i + 1], xs[i : i + 1], planes, fmt, 10, b, cfg, torch.float32)
            for i in range(t)]  # fmt: skip
    assert torch.equal(out, torch.cat(rows))


def test_row_blocks() -> None:
    assert [dp.row_block(t) for t in (1, 5, 8, 9, 12, 16)] == [1, 5, 8, 5, 6, 8]


def test_dp4a_config_splits_short_matrices() -> None:
    assert dp.dp4a_config("q4_k", 4096, 4096, 132).split == 1
    small = dp.dp4a_config("q6_k", 128, 4096, 132)
    assert small.split > 1


@pytest.mark.gpu
@pytest.mark.parametrize("t", [1, 5, 12])
@pytest.mark.parametrize("shape", [(4096, 4096), (1024, 4096), (28672, 4096), (4096, 14336)])
@pytest.mark.parametrize("qtype", list(KERNEL_QTYPES), ids=lambda q: q.name)
def test_gpu_dp4a_matches_reference(qtype: QT, shape: tuple[int, int], t: int) -> None:
    n, k = shape
    fmt = KERNEL_QTYPES[qtype]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    _check(qtype, n, k, dp.dp4a_config(fmt, n, k, sms), t=t)


@pytest.mark.gpu
@pytest.mark.parametrize("qtype", list(KERNEL_QTYPES), ids=lambda q: q.name)
def test_gpu_dp4a_error_vs_fp32_activations(qtype: QT) -> None:
    """What int8 activations cost: relative L2 error of the product vs fp32 x, < 1%."""
    w = pack_weight(random_raw(qtype, 4096, 4096, seed=5), DEV)
    x = torch.randn(1, 4096, device=DEV)
    fmt = KERNEL_QTYPES[qtype]
    xq, xs = quant_act_triton(x.half(), kernel_facts(fmt).act_layout)
    out = dp.dp4a_launch(xq, xs, [w.tensors[p] for p in kernel_facts(fmt).planes], fmt, 4096, None,
                         dp.dp4a_config(fmt, 4096, 4096, 132), torch.float32)  # fmt: skip
    ref = x.double() @ dequantize_weight(w).double().t()
    rel = ((out.double() - ref).norm() / ref.norm()).item()
    assert rel < 1e-2, rel


# ------------------------------------------------------------- fused producers, dispatch


@pytest.mark.parametrize("layout", ["w4", "w8"])
def test_norm_and_silu_emit_the_int8_form(layout: str) -> None:
    """RMSNorm / add+RMSNorm / SiLU x mul with `quant`, one or a few rows: a QAct whose int8
    form equals the standalone quantizer's on the stored output; wider batches (more rows than
    the dp4a GEMV takes) return plain tensors."""
    from localllm.kernels.fused.activation_triton import silu_mul
    from localllm.kernels.fused.norm_triton import add_rms_norm, rms_norm
    from localllm.kernels.fused.quant_act import QAct

    dt = torch.float16 if DEV == "cuda" else torch.float32
    rows = min(3, int8_rows(layout))  # Q8_0's "w8": one row
    x, r = (torch.randn(rows, 256, device=DEV, dtype=dt) for _ in range(2))
    w = torch.rand(256, device=DEV, dtype=dt) + 0.5
    outs = [rms_norm(x, w, 1e-5, quant=layout), add_rms_norm(x, r, w, 1e-5, quant=layout)[0],
            silu_mul(x, r, quant=layout)]  # fmt: skip
    for out in outs:
        assert isinstance(out, QAct) and set(out.q) == {layout}
        q, s = out.q[layout]
        rq, rs = quant_act_triton(out.x, layout)
        assert torch.equal(q, rq)
        torch.testing.assert_close(s, rs)
    assert torch.equal(outs[0].x, rms_norm(x, w, 1e-5))
    wide = torch.randn(int8_rows(layout) + 1, 256, device=DEV, dtype=dt)
    assert not isinstance(rms_norm(wide, w, 1e-5, quant=layout), QAct)


def test_qlinear_triton_takes_int8_path_for_few_rows() -> None:
    """A QAct input of 1 .. DP4A_MAX_T rows runs the dp4a GEMV (its output equals a direct
    dp4a launch per row); wider QActs and plain tensors take the float kernels."""
    from localllm.kernels.fused.quant_act import QAct
    from localllm.kernels.linear.qlinear_triton import qlinear_triton

    w = pack_weight(random_raw(QT.Q4_K, 64, 512, seed=2), DEV)
    x = torch.randn(1, 512, device=DEV)
    a = QAct(x)
    out = qlinear_triton(a, w)
    assert set(a.q) == {"w4"}  # quantized on first use, kept for the next weight
    xq, xs = a.q["w4"]
    direct = dp.dp4a_launch(xq, xs, [w.tensors[p] for p in kernel_facts("q4_k").planes], "q4_k", 64, None,
                            dp.dp4a_config("q4_k", 64, 512, 4), x.dtype)  # fmt: skip
    assert torch.equal(out, direct)
    ref = x.double() @ dequantize_weight(w).double().t()
    assert ((out.double() - ref).norm() / ref.norm()) < 2e-2
    fp = qlinear_triton(x, w)
    assert ((fp.double() - ref).norm() / ref.norm()) < 1e-4
    assert int8_rows("w4") == DP4A_MAX_T and int8_rows("w8") == 1
    x2 = torch.randn(2, 512, device=DEV)
    two = qlinear_triton(QAct(x2), w)
    assert torch.equal(two, torch.cat([qlinear_triton(QAct(x2[i : i + 1]), w) for i in range(2)]))
    wide = torch.randn(DP4A_MAX_T + 1, 512, device=DEV)
    torch.testing.assert_close(qlinear_triton(QAct(wide), w), qlinear_triton(wide, w))


@pytest.mark.parametrize("one_row", [True, False])
def test_qlinear_out_dtype(one_row: bool) -> None:
    """out_dtype=float32 (the LM head's logits): the dp4a GEMV writes fp32 directly, other
    paths convert; same values as the default dtype up to its rounding."""
    from localllm.kernels.fused.quant_act import QAct
    from localllm.kernels.registry import Ops

    w = pack_weight(random_raw(QT.Q4_K, 64, 256, seed=1), DEV)
    x = torch.randn(1 if one_row else 3, 256).to(
        DEV, torch.float16 if DEV == "cuda" else torch.float32
    )
    ops = Ops("triton")
    a = ops.qlinear(QAct(x) if one_row else x, w, out_dtype=torch.float32)
    b = ops.qlinear(QAct(x) if one_row else x, w)
    assert a.dtype == torch.float32 and b.dtype == x.dtype
    torch.testing.assert_close(a.to(x.dtype), b, rtol=1e-3, atol=1e-3 * b.abs().max().item())
    r = Ops("reference").qlinear(x, w, out_dtype=torch.float32)
    assert r.dtype == torch.float32
