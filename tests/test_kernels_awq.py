"""AWQ int4: the packer against AutoAWQ's own pack / unpack logic, the repacked planes against
the reference dequant, and every Triton path of the quantized linear (GEMV, dp4a GEMV, fused
GEMM, tile GEMM, dequantize + matmul) against the torch reference (interpreter on CPU with
small shapes; 4096-wide shapes on a GPU)."""

from __future__ import annotations

import pytest
import torch

from localllm.formats import awq as awq_file
from localllm.formats.awq import AWQTensor
from localllm.kernels.fused.quant_act import QAct, quant_act_ref
from localllm.kernels.linear.qlinear import dequantize_weight, pack_weight, qlinear_ref
from localllm.kernels.quant import kernel_facts

# ---- AutoAWQ's logic, reimplemented from its source (casper-hansen/AutoAWQ):
# awq/modules/linear/gemm.py WQLinear_GEMM.from_linear (the packing loop) and
# awq/utils/packing_utils.py (unpack_awq, reverse_awq_order, dequantize_gemm)
AUTOAWQ_ORDER_MAP = [0, 2, 4, 6, 1, 3, 5, 7]
AUTOAWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]


def autoawq_pack(intweight: torch.Tensor) -> torch.Tensor:
    """from_linear's loop: intweight int32 [K, N] -> qweight [K, N / 8]."""
    qweight = torch.zeros((intweight.shape[0], intweight.shape[1] // 8), dtype=torch.int32)
    for col in range(intweight.shape[1] // 8):
        for i in range(8):
            qweight[:, col] |= intweight[:, col * 8 + AUTOAWQ_ORDER_MAP[i]] << (i * 4)
    return qweight


def autoawq_unpack(words: torch.Tensor) -> torch.Tensor:
    """unpack_awq + reverse_awq_order + the overflow mask: int32 [R, C / 8] -> [R, C]."""
    shifts = torch.arange(0, 32, 4)
    iw = (words[:, :, None] >> shifts[None, None, :]).to(torch.int8).view(words.shape[0], -1)
    order = torch.arange(iw.shape[-1]).view(-1, 8)[:, AUTOAWQ_REVERSE_ORDER].view(-1)
    return iw[:, order] & 15


def autoawq_dequantize(qweight, qzeros, scales, group: int) -> torch.Tensor:
    """dequantize_gemm: -> W^T [K, N] fp16."""
    iz = autoawq_unpack(qzeros).repeat_interleave(group, dim=0)
    return (autoawq_unpack(qweight) - iz) * scales.repeat_interleave(group, dim=0)


def _awq(n: int, k: int, group: int, seed: int = 0) -> tuple[torch.Tensor, AWQTensor]:
    w = torch.randn(n, k, generator=torch.Generator().manual_seed(seed)) * 0.02
    qw, qz, s = awq_file.quantize(w, group)
    return w, AWQTensor("w", (n, k), qw, qz, s, group)


def test_packer_matches_autoawq():
    v = torch.randint(0, 16, (64, 48), generator=torch.Generator().manual_seed(1))
    packed = awq_file.pack(v.to(torch.uint8))
    assert torch.equal(packed, autoawq_pack(v.to(torch.int32)))
    assert torch.equal(awq_file.unpack(packed), v.to(torch.uint8))


@pytest.mark.parametrize("group", [128, 64])
def test_dequantized_planes_equal_the_rounded_values(group):
    w, t = _awq(48, 512, group)
    want = autoawq_dequantize(t.qweight, t.qzeros, t.scales, group).t()  # [N, K] fp16
    assert torch.equal(awq_file.dequantize(t.qweight, t.qzeros, t.scales, group), want)
    packed = pack_weight(t)
    assert packed.fmt == f"awq{group}" and packed.nbytes == 48 * 512 // 2 + 48 * 512 // group * 3
    assert torch.equal(dequantize_weight(packed, torch.float16), want)
    # the stored quants are the round-to-nearest ones of w under the stored scales and zeros
    sc = t.scales.float().t().repeat_interleave(group, dim=1)  # [N, K]
    z = autoawq_unpack(t.qzeros).t().float().repeat_interleave(group, dim=1)  # [N, K]
    rtn = (torch.round(w / sc) + z).clamp(0, 15)
    assert torch.equal(((rtn - z) * sc).to(torch.float16), want)


def _triton():
    pytest.importorskip("triton")
    from localllm.kernels.linear import qlinear_triton

    return qlinear_triton


@pytest.mark.parametrize("group", [128, 64])
@pytest.mark.parametrize("rows", [1, 3, 70])  # GEMV, fused GEMM, dequantize + matmul
def test_triton_matches_reference(group, rows):
    qt = _triton()
    _, t = _awq(40, 384, group, seed=rows)  # 40 rows: a partial row block; 3 K groups of 128
    w = pack_weight(t)
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(rows, 384, generator=gen)
    bias = torch.randn(40, generator=gen)
    ref = qlinear_ref(x, w, bias)
    out = qt.qlinear_triton(x, w, bias)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


@pytest.mark.parametrize("group", [128, 64])
def test_tile_gemm_and_dp4a_match_reference(group):
    qt = _triton()
    from localllm.kernels.linear.gemv_core_triton import MODE_DOT
    from localllm.kernels.linear.gemv_triton import QLinearConfig

    _, t = _awq(24, 256, group, seed=3)
    w = pack_weight(t)
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(2))
    ref = qlinear_ref(x, w)
    dot = qt.qlinear_launch(x, w, None, QLinearConfig(MODE_DOT, 16, 16, 128, warps=4))
    torch.testing.assert_close(dot, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())
    # one row with int8 activations: exact against the reference on the dequantized int8 x
    one = x[:1]
    layout = kernel_facts(w.fmt).act_layout
    xq, xs = quant_act_ref(one, layout)
    out = qt.qlinear_triton(QAct(one), w, out_dtype=torch.float32)
    from localllm.kernels.fused.quant_act import dequant_act

    want = dequant_act(xq, xs, layout).double() @ dequantize_weight(w).double().t()
    assert ((out.double() - want).abs().max() / want.abs().max()) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 8, 32, 100, 512])
@pytest.mark.parametrize("group", [128, 64])
def test_gpu_awq_matches_reference(rows, group):
    qt = _triton()
    n, k = 4096, 4096
    w0 = torch.randn(n, k, device="cuda") * 0.02
    qw, qz, s = awq_file.quantize(w0, group)
    w = pack_weight(AWQTensor("w", (n, k), qw, qz, s, group), "cuda")
    x = torch.randn(rows, k, device="cuda").half()
    ref = x.float() @ dequantize_weight(w).t()
    for inp in (x, QAct(x)) if rows == 1 else (x,):
        out = qt.qlinear_triton(inp, w).float()
        err = (out - ref).abs().max() / ref.abs().max()
        assert err < (2e-2 if isinstance(inp, QAct) else 2e-3), (rows, float(err))
