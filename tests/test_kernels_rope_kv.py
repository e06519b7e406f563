"""rope_store_kv: reference vs complex-number RoPE + slot bookkeeping; Triton vs reference."""

from __future__ import annotations

import os

import pytest
import torch

from localllm.kernels.attention.kv_dtypes import dequantize_kv, quantize_kv
from localllm.kernels.registry import Ops, triton_available

REF = Ops("reference")
DEV = "cuda" if torch.cuda.is_available() else "cpu"
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
KV_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.float8_e4m3fn]
needs_triton = pytest.mark.skipif(not triton_available(), reason="triton is not installed")


def _cos_sin(max_pos: int, d: int, theta: float = 10000.0) -> torch.Tensor:
    inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]  # [P, D/2]
    return torch.cat([ang.cos(), ang.sin()], -1).float()


def _rope_complex(x: torch.Tensor, pos: torch.Tensor, d: int, interleaved: bool) -> torch.Tensor:
    """Independent fp64 RoPE: pairs as complex numbers times e^(i * pos * theta_j)."""
    inv = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones_like(inv), pos.double()[:, None] * inv[None, :])  # [T, D/2]
    x = x.double()
    if interleaved:
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
        return torch.view_as_real(z * rot[:, None]).reshape(x.shape)
    z = torch.complex(x[..., : d // 2], x[..., d // 2 :]) * rot[:, None]
    return torch.cat([z.real, z.imag], -1)


def _caches(dtype: torch.dtype, blocks: int, hkv: int, bs: int, d: int, device: str):
    kc = torch.zeros(blocks, hkv, bs, d, dtype=dtype, device=device)
    vc = torch.zeros_like(kc)
    quant = dtype in (torch.int8, torch.float8_e4m3fn)
    ks = torch.full((blocks, hkv, bs), -1.0, device=device) if quant else None
    vs = ks.clone() if ks is not None else None
    return kc, vc, ks, vs


def _inputs(t: int, hq: int, hkv: int, d: int, dtype: torch.dtype, seed: int):
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(t, (hq + 2 * hkv) * d, generator=g).to(dtype).to(DEV)  # fused projection
    q = qkv[:, : hq * d].view(t, hq, d)
    k = qkv[:, hq * d : (hq + hkv) * d].view(t, hkv, d)
    v = qkv[:, (hq + hkv) * d :].view(t, hkv, d)
    pos = torch.randint(0, 500, (t,), generator=g).to(DEV)
    return qkv, q, k, v, pos


@pytest.mark.parametrize("interleaved", [True, False])
def test_reference_rope_matches_complex_rotation(interleaved: bool) -> None:
    qkv, q, k, v, pos = _inputs(9, 4, 2, 32, torch.float32, 0)
    q0, k0, v0 = q.clone(), k.clone(), v.clone()
    kc, vc, _, _ = _caches(torch.float32, 4, 2, 16, 32, DEV)
    slots = torch.arange(9, device=DEV)
    REF.rope_store_kv(
        q, k, v, pos, _cos_sin(512, 32).to(DEV), interleaved, kc, vc, None, None, slots
    )
    torch.testing.assert_close(
        q.double(), _rope_complex(q0, pos, 32, interleaved), atol=1e-5, rtol=0
    )
    torch.testing.assert_close(
        k.double(), _rope_complex(k0, pos, 32, interleaved), atol=1e-5, rtol=0
    )
    assert torch.equal(v, v0)  # v is never rotated
    torch.testing.assert_close(kc[0].transpose(0, 1)[:9], k)  # slots 0..8 live in block 0


def test_reference_store_uses_slots_and_skips_padding() -> None:
    _, q, k, v, pos = _inputs(5, 2, 2, 16, torch.float16, 1)
    kc, vc, _, _ = _caches(torch.float16, 6, 2, 4, 16, DEV)
    slots = torch.tensor(
        [21, -1, 3, 4, -1], device=DEV
    )  # block 5 off 1, block 0 off 3, block 1 off 0
    REF.rope_store_kv(q, k, v, pos, _cos_sin(512, 16).to(DEV), True, kc, vc, None, None, slots)
    assert torch.equal(vc[5, :, 1], v[0]) and torch.equal(vc[0, :, 3], v[2])
    assert torch.equal(vc[1, :, 0], v[3]) and torch.equal(kc[1, :, 0], k[3])
    assert int((vc != 0).any(-1).sum()) == 3 * 2  # nothing else written


@pytest.mark.parametrize("dtype,rel", [(torch.int8, 0.5 / 127), (torch.float8_e4m3fn, 1 / 16)])
def test_quantize_kv_error_bounds(dtype: torch.dtype, rel: float) -> None:
    x = torch.randn(50, 3, 64) * torch.rand(50, 3, 1) * 10
    x[0, 0] = 0.0  # an all-zero row must not produce NaN
    values, scale = quantize_kv(x, dtype)
    back = dequantize_kv(values, scale)
    amax = x.abs().amax(-1, keepdim=True)
    bound = amax * rel if dtype == torch.int8 else x.abs() * rel + amax / 448 * 2**-9
    assert bool(((back - x).abs() <= bound + 1e-6).all())
    assert torch.equal(back[0, 0], torch.zeros(64)) and float(scale[0, 0]) == 0.0
    assert torch.allclose(scale, amax[..., 0] / (127 if dtype == torch.int8 else 448))


def _triton_vs_reference(dtype, kv_dtype, t, hq, hkv, d, bs, interleaved, seed=0) -> None:
    _, q, k, v, pos = _inputs(t, hq, hkv, d, dtype, seed)
    blocks = (t + 3) // bs + 2
    slots = torch.randperm(blocks * bs, generator=torch.Generator().manual_seed(seed))[:t].to(DEV)
    slots[::5] = -1
    cs = _cos_sin(512, d).to(DEV)
    outs = []
    for ops in (REF, Ops("triton")):
        qq, kk = q.clone(), k.clone()
        caches = _caches(kv_dtype, blocks, hkv, bs, d, DEV)
        ops.rope_store_kv(qq, kk, v, pos, cs, interleaved, *caches, slots)
        outs.append((qq, kk, caches))
    (q_r, k_r, c_r), (q_t, k_t, c_t) = outs
    tols = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}
    tol = tols[dtype]
    page_tol = max(tol, tols.get(kv_dtype, 0.0))
    torch.testing.assert_close(q_t, q_r, atol=tol, rtol=tol)
    torch.testing.assert_close(k_t, k_r, atol=tol, rtol=tol)
    for i in (0, 1):  # K and V pages, compared after dequantization
        scale_r, scale_t = c_r[2 + i], c_t[2 + i]
        back_r, back_t = dequantize_kv(c_r[i], scale_r), dequantize_kv(c_t[i], scale_t)
        if scale_r is None:
            torch.testing.assert_close(back_t, back_r, atol=page_tol, rtol=page_tol)
            continue
        torch.testing.assert_close(scale_t, scale_r, atol=tol * 0.02, rtol=tol)
        step = scale_r.abs()[..., None] * (
            1.0 if kv_dtype == torch.int8 else 32.0
        )  # <= one code step
        bound = step * 1.01 + tol * back_r.abs() + 1e-6  # k itself may differ by one ulp
        excess = (back_t - back_r).abs() - bound
        worst = tuple(int(j) for j in torch.nonzero(excess == excess.max())[0])
        assert excess.max() <= 0, (
            worst,
            c_t[i][worst].float(),
            c_r[i][worst].float(),
            scale_t[worst[:3]],
            scale_r[worst[:3]],
        )


@needs_triton
@pytest.mark.parametrize("kv_dtype", KV_DTYPES)
@pytest.mark.parametrize("interleaved", [True, False])
def test_triton_matches_reference_small(kv_dtype: torch.dtype, interleaved: bool) -> None:
    if kv_dtype == torch.float8_e4m3fn and INTERPRET:
        pytest.skip("the Triton interpreter rounds fp32->fp8 stores incorrectly")
    _triton_vs_reference(torch.float16, kv_dtype, 7, 4, 2, 32, 4, interleaved)


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_triton_matches_reference_dtypes_and_odd_dims(dtype: torch.dtype) -> None:
    _triton_vs_reference(dtype, torch.int8, 5, 3, 3, 24, 8, True, seed=3)  # non-pow2 head_dim


@pytest.mark.gpu
@pytest.mark.parametrize("kv_dtype", KV_DTYPES)
@pytest.mark.parametrize("hq,hkv,d", [(32, 8, 128), (32, 32, 128), (16, 2, 64), (8, 1, 256)])
def test_triton_matches_reference_realistic(kv_dtype, hq, hkv, d) -> None:
    for dtype in (torch.float16, torch.bfloat16):
        _triton_vs_reference(dtype, kv_dtype, 300, hq, hkv, d, 16, True, seed=d)
        _triton_vs_reference(dtype, kv_dtype, 64, hq, hkv, d, 32, False, seed=d + 1)
