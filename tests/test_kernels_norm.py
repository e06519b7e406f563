"""RMSNorm, add+RMSNorm and silu_mul: reference vs fp64 math, Triton vs reference."""

from __future__ import annotations

import pytest
import torch

from localllm.kernels.registry import Ops, triton_available

REF = Ops("reference")
DEV = "cuda" if torch.cuda.is_available() else "cpu"
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
needs_triton = pytest.mark.skipif(not triton_available(), reason="triton is not installed")


def _rms64(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.double()
    return x / torch.sqrt(x.square().mean(-1, keepdim=True) + eps) * w.double()


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> None:
    torch.testing.assert_close(a.float(), b.float(), atol=TOL[dtype] * 4, rtol=TOL[dtype] * 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rms_norm_reference_matches_fp64(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(7, 96, generator=g) * 3).to(dtype)
    w = torch.randn(96, generator=g).to(dtype)
    y = REF.rms_norm(x, w, 1e-5)
    assert y.dtype == dtype and y.shape == x.shape
    _close(y, _rms64(x, w, 1e-5), dtype)


def test_add_rms_norm_reference_returns_normed_and_sum() -> None:
    g = torch.Generator().manual_seed(1)
    x, r = torch.randn(5, 64, generator=g).half(), torch.randn(5, 64, generator=g).half()
    w = torch.rand(64, generator=g) + 0.5
    out, res = REF.add_rms_norm(x, r, w, 1e-6)
    assert res.dtype == torch.float16 and out.dtype == torch.float16
    torch.testing.assert_close(res, x + r)
    _close(out, _rms64(res, w, 1e-6), torch.float16)


def test_silu_mul_reference_on_strided_halves() -> None:
    gu = torch.randn(6, 2 * 40, dtype=torch.float64)
    y = REF.silu_mul(gu[:, :40].float(), gu[:, 40:].float())
    expect = gu[:, :40] / (1 + torch.exp(-gu[:, :40])) * gu[:, 40:]
    torch.testing.assert_close(y.double(), expect, atol=1e-6, rtol=1e-5)


def _triton_cases(dtype: torch.dtype, rows: int, d: int) -> None:
    tri = Ops("triton")
    g = torch.Generator().manual_seed(d)
    x = (torch.randn(rows, d, generator=g) * 2).to(dtype).to(DEV)
    r = torch.randn(rows, d, generator=g).to(dtype).to(DEV)
    w = torch.randn(d, generator=g).to(dtype).to(DEV)
    _close(tri.rms_norm(x, w, 1e-5), REF.rms_norm(x, w, 1e-5), dtype)
    out_t, res_t = tri.add_rms_norm(x, r, w, 1e-5)
    out_r, res_r = REF.add_rms_norm(x, r, w, 1e-5)
    torch.testing.assert_close(res_t, res_r)
    _close(out_t, out_r, dtype)
    gu = torch.randn(rows, 2 * d, generator=g).to(dtype).to(DEV)
    _close(tri.silu_mul(gu[:, :d], gu[:, d:]), REF.silu_mul(gu[:, :d], gu[:, d:]), dtype)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 100, 1100])  # 1100: 3 programs per row
def test_triton_norm_and_silu_match_reference(dtype: torch.dtype, d: int) -> None:
    _triton_cases(dtype, 3, d)


@needs_triton
def test_triton_rms_norm_on_head_view() -> None:
    # qk-norm: [T, H, D] non-contiguous view of a fused qkv row, normalised per head
    qkv = torch.randn(4, 3 * 32, device=DEV)
    q = qkv[:, :64].view(4, 2, 32)
    w = torch.randn(32, device=DEV)
    _close(Ops("triton").rms_norm(q, w, 1e-6), REF.rms_norm(q, w, 1e-6), torch.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rows,d", [(1, 4096), (257, 4096), (64, 5120), (33, 14336)])
def test_triton_norm_and_silu_realistic_shapes(dtype: torch.dtype, rows: int, d: int) -> None:
    _triton_cases(dtype, rows, d)
