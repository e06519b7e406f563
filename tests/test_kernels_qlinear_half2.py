"""The packed-fp16 (half2) T=1 GEMV: its PTX checked by a numpy model of the instructions,
its plain-Triton twin in the interpreter, and both against the reference on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as QT
from test_kernels_qlinear import _triton, random_raw  # shared fixtures of the qlinear tests

from localllm.kernels.linear.qlinear import dequantize_weight, pack_weight
from localllm.kernels.quant import kernel_facts


def _f16x2(v: np.ndarray) -> np.ndarray:
    """uint32 [n] -> float64 [2, n] (low half, high half)."""
    return np.stack([v & 0xFFFF, v >> 16]).astype(np.uint16).view(np.float16).astype(np.float64)


_F16X2 = {"fma": lambda a, b, c: a * b + c, "add": np.add, "sub": np.subtract}


def _run_ptx(asm: str, args: list[np.ndarray]) -> np.ndarray:
    """Tiny interpreter for the packed-fp16 PTX (`kernels/quant/h2_asm.py`, `half2_triton.py`; b32 logic, lop3, prmt, f16x2 math);
    $0 is the output, args are uint32 arrays for $1, $2, ..."""
    regs = {f"${i + 1}": a.astype(np.uint32) for i, a in enumerate(args)}

    def val(tok: str) -> np.ndarray:
        v = regs[tok] if tok in regs else np.uint32(int(tok, 0))
        return np.broadcast_to(v, args[0].shape).astype(np.uint32)

    for line in asm.replace("{", "\n").replace("}", "\n").split(";"):
        line = line.strip()
        if not line or line.startswith(".reg"):
            continue
        op, rest = line.split(None, 1)
        dst, *src = [t.strip() for t in rest.split(",")]
        v = [val(t) for t in src]
        kind = op.split(".")[0]
        if kind in ("sub", "add", "fma"):
            b = (
                _F16X2[kind](*[_f16x2(x) for x in v])
                .astype(np.float16)
                .view(np.uint16)
                .astype(np.uint32)
            )
            regs[dst] = b[0] | (b[1] << 16)
        elif kind == "prmt":
            both = v[0].astype(np.uint64) | (v[1].astype(np.uint64) << 32)
            sel = int(src[2], 0)
            regs[dst] = sum(((both >> (8 * ((sel >> 4 * i) & 7))) & 0xFF) << (8 * i)
                            for i in range(4)).astype(np.uint32)  # fmt: skip
        elif (
            kind == "lop3"
        ):  # any 3-input logic function: bit i of the LUT = f(a, b, c) at i = 4a+2b+c
            lut, out = int(src[3], 0), np.zeros_like(v[0])
            for i in range(8):
                if lut >> i & 1:
                    pick = [x if i >> (2 - j) & 1 else ~x for j, x in enumerate(v[:3])]
                    out |= pick[0] & pick[1] & pick[2]
            regs[dst] = out
        else:
            fn = {"mov": lambda a: a, "shr": lambda a, b: a >> b, "shl": lambda a, b: a << b,
                  "and": np.bitwise_and, "or": np.bitwise_or}[kind]  # fmt: skip
            regs[dst] = np.asarray(fn(*v), np.uint32)
    return regs["$0"]


@pytest.mark.parametrize("fmt", ["q4_k", "q5_k", "q6_k"])
def test_half2_ptx_decodes_fields(fmt: str) -> None:
    """The word asm gives acc + sum_s (q_s - Z) x_s for the fields (and extra bits) of the
    packed layout: fields s and s + 4 pair with the low and high half of activation pair s."""
    pytest.importorskip("triton")
    from localllm.kernels.quant import triton_hooks

    code, hb = {"q4_k": (2, 0), "q5_k": (3, 1), "q6_k": (4, 2)}[fmt]
    asm = triton_hooks(fmt).h2_word.fn.__globals__["H2_ASM"]  # the format's word PTX
    rng = np.random.default_rng(code)
    n = 512
    w = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    e = rng.integers(0, 2 ** (8 * hb), n).astype(np.int64) if hb else np.zeros(n, np.int64)
    if hb == 2:  # int16 extra, sign-extended to int32 as the loader does
        e = e.astype(np.uint16).view(np.int16).astype(np.int32).view(np.uint32)
    x = rng.standard_normal((4, 2, n)).astype(np.float16)  # pair s: (field s, field s + 4)
    xp = [x[s].view(np.uint16).astype(np.uint32) for s in range(4)]
    xp = [p[0] | (p[1] << 16) for p in xp]
    acc0 = np.stack([rng.standard_normal(n), rng.standard_normal(n)]).astype(np.float16)
    acc = acc0.view(np.uint16).astype(np.uint32)
    args = [acc[0] | (acc[1] << 16), w, *xp] + ([e.astype(np.uint32)] if hb else [])
    got = _f16x2(_run_ptx(asm.value, args))
    z = kernel_facts(fmt).h2_center
    ev = e.astype(np.uint32)
    for half in range(2):
        expect = acc0[half].astype(np.float64)
        for s in range(4):
            f = s + 4 * half  # field
            q = (w >> (4 * f)) & 15
            if hb:
                q = q | (((ev >> (hb * f)) & (2**hb - 1)) << 4)
            expect += (q.astype(np.float64) - z) * x[s, half]
        np.testing.assert_allclose(got[half].astype(np.float64), expect, rtol=0, atol=0.5)


def test_half2_ptx_pairs_and_sums() -> None:
    h2 = pytest.importorskip("localllm.kernels.linear.half2_triton")
    rng = np.random.default_rng(0)
    a, b = (rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32) for _ in range(2))
    lo = _run_ptx(h2._PRMT_LO.value, [a, b])
    hi = _run_ptx(h2._PRMT_HI.value, [a, b])
    np.testing.assert_array_equal(lo, (a & 0xFFFF) | ((b & 0xFFFF) << 16))
    np.testing.assert_array_equal(hi, (a >> 16) | (b & 0xFFFF0000))
    x, y = (rng.standard_normal((2, 64)).astype(np.float16) for _ in range(2))
    bits = [(v.view(np.uint16).astype(np.uint32)) for v in (x, y)]
    got = _f16x2(_run_ptx(h2._ADD2.value, [b_[0] | (b_[1] << 16) for b_ in bits]))
    np.testing.assert_array_equal(got, (x + y).astype(np.float64))


@pytest.mark.parametrize("qtype", [QT.Q4_0, QT.Q4_K, QT.Q5_K, QT.Q6_K], ids=lambda q: q.name)
@pytest.mark.parametrize("cfg", [(4, 512, 1), (8, 256, 2)], ids=["vec", "vec-split"])
def test_triton_half2_matches_reference(qtype: QT, cfg: tuple[int, int, int]) -> None:
    """fp16 x on the packed-fp16 GEMV (its plain-Triton twin: the interpreter runs no asm),
    K = 768 so the last step is masked; |err| within the GPU tolerance."""
    qt = _triton()
    bn, tile, split = cfg
    w = pack_weight(random_raw(qtype, 24, 768, seed=bn, scale=0.002))
    x = torch.randn(1, 768, generator=torch.Generator().manual_seed(bn)).half()
    config = qt.QLinearConfig(qt.MODE_VEC, 1, bn, tile, split=split, half2=True)
    assert qt._h2_mode(x, w.fmt, config) > 0
    out = qt.qlinear_launch(x, w, None, config)
    ref = x.double() @ dequantize_weight(w).double().t()
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=3e-3 * ref.abs().max().item())


# ------------------------------------------------------------------ GPU, realistic shapes


@pytest.mark.gpu
@pytest.mark.parametrize("qtype", [QT.Q4_0, QT.Q4_K, QT.Q5_K, QT.Q6_K], ids=lambda q: q.name)
@pytest.mark.parametrize("n", [512, 6144])
def test_gpu_half2_gemv(qtype: QT, n: int) -> None:
    """T=1 packed-fp16 PTX vs the fp32-decode GEMV and an fp64 reference, with bias, larger
    activations and (n=512) split-K atomics."""
    qt = _triton()
    w = pack_weight(random_raw(qtype, n, 4096, seed=n, scale=0.002), "cuda")
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = (4 * torch.randn(1, 4096, device="cuda", generator=gen)).half()
    bias = torch.randn(n, device="cuda").half()
    ref = x.double() @ dequantize_weight(w).double().t() + bias.double()
    cfg = qt.pick_config(w.fmt, n, 4096, 1, x.device)
    assert cfg.half2 and qt._h2_mode(x, w.fmt, cfg) == 2
    tol = {"rtol": 1e-2, "atol": 3e-3 * ref.abs().max().item()}
    for c in (cfg, qt.QLinearConfig(**{**cfg.__dict__, "half2": False})):
        out = qt.qlinear_launch(x, w, bias, c)
        torch.testing.assert_close(out.double(), ref, **tol)
