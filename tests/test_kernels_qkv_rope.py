"""QKV projection + RoPE + KV store as one op: the fused dp4a epilogue (decode token, int8
activations, float cache) against the same Triton ops run separately, and the reference op
against its definition. Mixed formats (Q4_K q+k beside a Q6_K v, as in Q4_K_M files), both
RoPE styles, bias, a padding row (slot -1); two weights of one int8 layout share a launch,
others (Q8_0 q+k beside a Q4_K v) take one each. CPU: interpreter, small heads; GPU: 8B heads."""

from __future__ import annotations

import pytest
import torch
from gguf import GGMLQuantizationType as QT
from test_kernels_qlinear import random_raw

from localllm.kernels.fused.qkv_rope import Heads, compose
from localllm.kernels.fused.quant_act import QAct
from localllm.kernels.fused.rope_kv import rope_store_kv as rope_ref
from localllm.kernels.linear.qlinear import pack_weight, qlinear_ref
from localllm.kernels.plan import qkv_fusable
from localllm.kernels.registry import Ops

pytest.importorskip("triton")
from localllm.kernels.fused.quant_act_triton import quant_act_triton  # noqa: E402
from localllm.kernels.fused.rope_kv_triton import rope_store_kv as rope_triton  # noqa: E402
from localllm.kernels.linear.dp4a_triton import (  # noqa: E402
    RopeConfig,
    dp4a_rope_launch,
    rope_config,
)
from localllm.kernels.linear.qlinear_triton import qlinear_triton  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _case(heads: Heads, qtypes: list[QT], k: int, bias: bool, seed: int):
    dt = torch.float16 if DEV == "cuda" else torch.float32
    g = torch.Generator().manual_seed(seed)
    d = heads.dim
    sizes = (
        [(heads.n_q + heads.n_kv) * d, heads.n_kv * d]
        if len(qtypes) == 2
        else [(heads.n_q + 2 * heads.n_kv) * d]
    )
    ws = [
        pack_weight(random_raw(q, n, k, seed=seed + i, scale=0.002), DEV)
        for i, (q, n) in enumerate(zip(qtypes, sizes))
    ]
    b = (torch.randn(sum(sizes), generator=g) * 0.1).to(DEV, dt) if bias else None
    x = torch.randn(1, k, generator=g).to(DEV, dt)
    pos = torch.tensor([37], device=DEV)
    ang = torch.arange(64, dtype=torch.float64)[:, None] / (
        100.0 ** (torch.arange(d // 2) / (d // 2))
    )
    cs = torch.cat([ang.cos(), ang.sin()], -1).float().to(DEV)
    cache = lambda: torch.zeros(4, heads.n_kv, 16, d, dtype=dt, device=DEV)  # noqa: E731
    return ws, b, x, pos, cs, cache


def _fused_vs_separate(ws, b, heads, x, pos, cs, cache, slot):
    """The fused op and the separate Triton ops on the same input: asserts they agree and
    returns (fused qkv, its k cache, its v cache)."""
    sep_kc, sep_vc = cache(), cache()
    sep = compose(qlinear_triton, rope_triton, QAct(x), ws, b, heads, pos, cs, sep_kc, sep_vc,
                  None, None, slot)  # fmt: skip
    kc, vc = cache(), cache()
    out = Ops("triton").qkv_rope_store(QAct(x), ws, b, heads, pos, cs, kc, vc, None, None, slot)
    tol = dict(rtol=2e-3, atol=2e-3 * sep.abs().max().item())
    torch.testing.assert_close(out, sep, **tol)
    torch.testing.assert_close(kc, sep_kc, **tol)
    torch.testing.assert_close(vc, sep_vc, **tol)
    return out, kc, vc


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize(
    "qtypes,bias",
    [
        ([QT.Q4_K, QT.Q6_K], False),
        ([QT.Q8_0], True),
        ([QT.Q4_0], False),
        ([QT.Q8_0, QT.Q4_K], True),
    ],
)
def test_fused_qkv_rope_matches_separate_ops(
    interleaved: bool, qtypes: list[QT], bias: bool
) -> None:
    heads = Heads(4, 2, 64, interleaved) if DEV == "cuda" else Heads(2, 1, 16, interleaved)
    ws, b, x, pos, cs, cache = _case(heads, qtypes, 256, bias, seed=len(qtypes) + int(bias))
    slot = torch.tensor([16 * 2 + 5], device=DEV)
    assert qkv_fusable(QAct(x), ws, heads.dim, cs, cache(), cache())
    out, kc, vc = _fused_vs_separate(ws, b, heads, x, pos, cs, cache, slot)
    assert kc[2, :, 5].abs().sum() > 0 and vc[2, :, 5].abs().sum() > 0
    assert kc.abs().sum() == kc[2, :, 5].abs().sum()  # nothing else written
    # the same within int8-activation error of the float reference op
    rk, rv = cache(), cache()
    ref = Ops("reference").qkv_rope_store(x, ws, b, heads, pos, cs, rk, rv, None, None, slot)
    assert (out.float() - ref.float()).norm() / ref.float().norm() < 2e-2


def test_fused_padding_row_stores_nothing() -> None:
    heads = Heads(2, 1, 16, True)
    ws, b, x, pos, cs, cache = _case(heads, [QT.Q4_K, QT.Q6_K], 256, False, seed=9)
    kc, vc = cache(), cache()
    out = Ops("triton").qkv_rope_store(QAct(x), ws, b, heads, pos, cs, kc, vc, None, None,
                                       torch.tensor([-1], device=DEV))  # fmt: skip
    assert out.abs().sum() > 0 and kc.abs().sum() == 0 and vc.abs().sum() == 0


def test_reference_op_is_linear_then_rope_store() -> None:
    heads = Heads(4, 2, 32, False)
    ws, b, x, pos, cs, cache = _case(heads, [QT.Q4_K, QT.Q6_K], 256, True, seed=3)
    x = torch.randn(3, 256).to(DEV, x.dtype)
    pos = torch.tensor([0, 5, 63], device=DEV)
    slot = torch.tensor([0, 17, -1], device=DEV)
    kc, vc = cache(), cache()
    got = Ops("reference").qkv_rope_store(x, ws, b, heads, pos, cs, kc, vc, None, None, slot)
    qkv = torch.cat([qlinear_ref(x, w) for w in ws], -1) + b
    ek, ev = cache(), cache()
    d, nq, nkv = 32, 4, 2
    q, k, v = (
        qkv[:, : nq * d].view(3, nq, d),
        qkv[:, nq * d : (nq + nkv) * d].view(3, nkv, d),
        qkv[:, (nq + nkv) * d :].view(3, nkv, d),
    )
    rope_ref(q, k, v, pos, cs, False, ek, ev, None, None, slot)
    torch.testing.assert_close(got, qkv)
    torch.testing.assert_close(kc, ek)
    torch.testing.assert_close(vc, ev)


def _launch(ws, heads, x, pos, cs, cache, slot, cfg: RopeConfig | None):
    """One fused launch over all of ws (one int8 layout) with `cfg`: (qkv, k cache, v cache)."""
    xq, xs = quant_act_triton(x, "w4")
    out = torch.empty((x.shape[0], sum(w.n for w in ws)), dtype=x.dtype, device=DEV)
    kc, vc = cache(), cache()
    dp4a_rope_launch(xq, xs, [(w.fmt, w.n, w.planes) for w in ws], None, out, 0, heads.n_q,
                     heads.n_kv, heads.dim, pos, cs, heads.interleaved, kc, vc, slot, cfg)  # fmt: skip
    return out, kc, vc


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("cfg", [RopeConfig(2, 2, 64), RopeConfig(4, 1, 32), RopeConfig(8, 4, 128)],
                         ids=lambda c: f"p{c.pairs}w{c.warps}g{c.ng}")  # fmt: skip
def test_fused_qkv_rope_pairs_per_program(interleaved: bool, cfg: RopeConfig) -> None:
    """Programs of several RoPE pairs (wider weight tiles) give what one pair per program
    gives: the same rows, each rotated with its own pair, stored to the same slots."""
    heads = Heads(4, 2, 64, interleaved) if DEV == "cuda" else Heads(2, 1, 16, interleaved)
    ws, _, x, pos, cs, cache = _case(heads, [QT.Q4_K, QT.Q6_K], 256, False, seed=21)
    slot = torch.tensor([16 + 3], device=DEV)
    want = _launch(ws, heads, x, pos, cs, cache, slot, RopeConfig())
    got = _launch(ws, heads, x, pos, cs, cache, slot, cfg)
    assert want[1].abs().sum() > 0 and want[2].abs().sum() > 0
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3 * b.abs().max().item())
    with pytest.raises(ValueError, match="pairs per program"):
        _launch(ws, heads, x, pos, cs, cache, slot, RopeConfig(pairs=3))


@pytest.mark.parametrize("fmt", [QT.Q4_0, QT.Q4_K])
def test_fused_qkv_rope_takes_its_config_by_format(fmt: QT) -> None:
    """Without a config the launch takes the one measured for its first weight's format
    (Q4_0: two pairs per program, 128-group steps; others: one pair) and gives the one-pair
    result."""
    assert rope_config(QT.Q4_0.name.lower()) != RopeConfig() == rope_config("q4_k")
    heads = Heads(4, 2, 64, False) if DEV == "cuda" else Heads(2, 1, 16, False)
    ws, _, x, pos, cs, cache = _case(heads, [fmt], 256, False, seed=22)
    slot = torch.tensor([16 + 5], device=DEV)
    want = _launch(ws, heads, x, pos, cs, cache, slot, RopeConfig())
    got = _launch(ws, heads, x, pos, cs, cache, slot, None)
    assert want[1].abs().sum() > 0
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3 * b.abs().max().item())


@pytest.mark.gpu
def test_gpu_fused_qkv_rope_8b_heads() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    heads = Heads(32, 8, 128, True)
    ws, b, x, pos, cs, cache = _case(heads, [QT.Q4_K, QT.Q6_K], 4096, False, seed=5)
    _fused_vs_separate(ws, None, heads, x, pos, cs, cache, torch.tensor([40], device=DEV))
