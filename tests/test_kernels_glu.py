"""Gate/up + SiLU x mul as one op: the fused dp4a launch (decode token, int8 activations, the
int8 form of h emitted by the last program of each 32-element group) against the same Triton
ops run separately, repeated launches (the group counters reset themselves), and the
reference op against its definition. CPU: interpreter, small shapes; GPU: 8B shapes."""

from __future__ import annotations

import pytest
import torch
from gguf import GGMLQuantizationType as QT
from test_kernels_qlinear import random_raw

from localllm.kernels.activation import silu_mul as silu_ref
from localllm.kernels.glu import compose
from localllm.kernels.qlinear import pack_weight, qlinear_ref
from localllm.kernels.quant_act import QAct
from localllm.kernels.registry import Ops

pytest.importorskip("triton")
from localllm.kernels import glu_triton, qlinear_dp4a_triton  # noqa: E402
from localllm.kernels.activation_triton import silu_mul as silu_triton  # noqa: E402
from localllm.kernels.qlinear_triton import qlinear_triton  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _case(qtype: QT, f: int, k: int, seed: int):
    dt = torch.float16 if DEV == "cuda" else torch.float32
    w = pack_weight(random_raw(qtype, 2 * f, k, seed=seed, scale=0.003), DEV)
    x = torch.randn(1, k, generator=torch.Generator().manual_seed(seed)).to(DEV, dt)
    return [w], x


def _check_same(fused: QAct, sep: QAct, quant: str) -> None:
    torch.testing.assert_close(fused.x, sep.x, rtol=2e-3, atol=2e-3 * sep.x.abs().max().item())
    (fq, fs), (sq, ss) = fused.q[quant], sep.q[quant]
    assert (fq.int() - sq.int()).abs().max() <= 1  # an fp16 last-bit difference moves a step
    torch.testing.assert_close(fs[..., 0], ss[..., 0], rtol=2e-3, atol=1e-6)


@pytest.mark.parametrize("qtype,quant", [(QT.Q4_K, "w4"), (QT.Q6_K, "w8"), (QT.Q8_0, "w4"),
                                         (QT.Q4_0, "w4")])
def test_fused_glu_matches_separate_ops(qtype: QT, quant: str) -> None:
    f, k = (512, 1024) if DEV == "cuda" else (64, 256)
    ws, x = _case(qtype, f, k, seed=int(qtype))
    assert glu_triton.fusable(QAct(x), ws, f, quant)
    sep = compose(qlinear_triton, silu_triton, QAct(x), ws, f, quant)
    for _ in range(2):  # the second launch runs on the counters the first one reset
        fused = Ops("triton").gate_up_silu(QAct(x), ws, f, quant=quant)
        _check_same(fused, sep, quant)
    assert all(int(c.abs().sum()) == 0 for c in qlinear_dp4a_triton._COUNTERS.values())
    ref = Ops("reference").gate_up_silu(x, ws, f, quant=quant)
    assert (fused.x.float() - ref.float()).norm() / ref.float().norm() < 2e-2


def test_unfusable_inputs_compose() -> None:
    ws, x = _case(QT.Q4_K, 64, 256, seed=2)
    x3 = torch.cat([x, x, x])  # three rows: the batched path, no int8 form
    got = Ops("triton").gate_up_silu(x3, ws, 64, quant="w4")
    assert not isinstance(got, QAct) and got.shape == (3, 64)
    assert not glu_triton.fusable(QAct(x), ws, 64, None)
    with pytest.raises(ValueError, match="gate_up_silu"):
        Ops("reference").gate_up_silu(x, ws, 48)


def test_reference_op_is_linear_then_silu_mul() -> None:
    ws, x = _case(QT.Q6_K, 64, 256, seed=4)
    w2 = [pack_weight(random_raw(QT.Q4_K, 64, 256, seed=s), DEV) for s in (5, 6)]  # split gate/up
    for w in (ws, w2):
        gu = torch.cat([qlinear_ref(x, wi) for wi in w], -1)
        torch.testing.assert_close(Ops("reference").gate_up_silu(x, w, 64),
                                   silu_ref(gu[:, :64], gu[:, 64:]))  # fmt: skip


@pytest.mark.gpu
def test_gpu_fused_glu_8b_shape() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    ws, x = _case(QT.Q4_K, 14336, 4096, seed=7)
    sep = compose(qlinear_triton, silu_triton, QAct(x), ws, 14336, "w4")
    for _ in range(3):
        _check_same(Ops("triton").gate_up_silu(QAct(x), ws, 14336, quant="w4"), sep, "w4")
