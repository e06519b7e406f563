"""qlinear: GGUF repacking vs gguf-py's dequantizer, the torch reference vs a plain matmul, and
the Triton op vs the reference (interpreter on CPU with tiny shapes; real shapes on a GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize as gguf_dequantize

from localllm.formats.gguf import RawTensor
from localllm.formats.quants import LAYOUTS
from localllm.kernels.linear.qlinear import (
    QuantWeight,
    concat_weights,
    dequantize_weight,
    pack_weight,
    qlinear_ref,
)

KERNEL_QTYPES = {
    QT.Q8_0: "q8_0",
    QT.Q4_0: "q4_0",
    QT.Q4_K: "q4_k",
    QT.Q5_K: "q5_k",
    QT.Q6_K: "q6_k",
}
DENSE_QTYPES = [QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q2_K, QT.Q3_K]


def random_raw(qtype: QT, n: int, k: int, seed: int = 0, scale: float = 0.01) -> RawTensor:
    """Random GGUF blocks [n, row_bytes]: uniform payload bytes, finite random fp16 scales."""
    rng = np.random.default_rng(seed)
    lay = LAYOUTS[qtype]
    blocks = rng.integers(0, 256, (n, k // lay.block_size, lay.type_size), dtype=np.uint8)
    for off in lay.f16_fields:
        d = (rng.standard_normal((n, k // lay.block_size, 1)) * scale).astype(np.float16)
        blocks[:, :, off : off + 2] = d.view(np.uint8)
    return RawTensor("blk.0.w", qtype, (n, k), blocks.reshape(n, -1))


def _triton():
    pytest.importorskip("triton")
    from localllm.kernels.linear import qlinear_triton

    return qlinear_triton


# ------------------------------------------------------------------------- packing (CPU)


@pytest.mark.parametrize("qtype", list(KERNEL_QTYPES), ids=lambda q: q.name)
def test_pack_dequantize_matches_gguf(qtype: QT) -> None:
    raw = random_raw(qtype, 16, 768, seed=int(qtype))
    w = pack_weight(raw, "cpu")
    assert w.fmt == KERNEL_QTYPES[qtype] and (w.n, w.k) == (16, 768)
    # planes keep the file's bytes; Q4_K/Q5_K scales are decoded to 16 bytes per super-block
    extra = 4 * 16 * 768 // 256 if qtype in (QT.Q4_K, QT.Q5_K) else 0
    assert w.nbytes == raw.nbytes + extra
    expect = gguf_dequantize(raw.data, qtype).reshape(16, 768)
    np.testing.assert_array_equal(dequantize_weight(w).numpy(), expect)


@pytest.mark.parametrize("qtype", DENSE_QTYPES, ids=lambda q: q.name)
def test_pack_other_quants_become_dense(qtype: QT) -> None:
    raw = random_raw(qtype, 8, 512, seed=3)
    w = pack_weight(raw, "cpu", dtype=torch.float32)
    assert w.fmt == "dense" and w.tensors["w"].shape == (8, 512)
    expect = gguf_dequantize(raw.data, qtype).reshape(8, 512)
    np.testing.assert_allclose(dequantize_weight(w).numpy(), expect, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("qtype", [QT.F32, QT.F16], ids=lambda q: q.name)
def test_pack_float_weights(qtype: QT) -> None:
    a = np.random.default_rng(1).standard_normal((6, 40)).astype(np.float32)
    raw = RawTensor("w", qtype, (6, 40), a.astype(np.float16 if qtype == QT.F16 else np.float32))
    w = pack_weight(raw, "cpu", dtype=torch.float32)
    tol = 1e-3 if qtype == QT.F16 else 0.0
    np.testing.assert_allclose(dequantize_weight(w).numpy(), a, atol=tol)


def test_concat_weights_stacks_rows() -> None:
    a, b = (pack_weight(random_raw(QT.Q4_K, n, 512, seed=n)) for n in (8, 24))
    fused = concat_weights([a, b])
    assert fused is not None and (fused.fmt, fused.n, fused.k) == ("q4_k", 32, 512)
    both = torch.cat([dequantize_weight(a), dequantize_weight(b)])
    torch.testing.assert_close(dequantize_weight(fused), both, rtol=0, atol=0)
    c = pack_weight(random_raw(QT.Q6_K, 8, 512))
    assert concat_weights([a, c]) is None


def test_pack_rejects_vectors() -> None:
    raw = RawTensor("norm", QT.F32, (64,), np.zeros(64, np.float32))
    with pytest.raises(ValueError, match="2-D"):
        pack_weight(raw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_reference_matches_plain_matmul(dtype: torch.dtype) -> None:
    w = pack_weight(random_raw(QT.Q6_K, 24, 512, seed=5))
    x = torch.randn(5, 512).to(dtype)
    bias = torch.randn(24)
    out = qlinear_ref(x, w, bias)
    assert out.dtype == dtype and out.shape == (5, 24)
    wd = torch.from_numpy(gguf_dequantize(random_raw(QT.Q6_K, 24, 512, seed=5).data, QT.Q6_K))
    expect = x.double() @ wd.reshape(24, 512).double().t() + bias.double()
    torch.testing.assert_close(out.double(), expect.to(dtype).double(), rtol=1e-2, atol=1e-2)
    cached = QuantWeight(w.fmt, w.n, w.k, w.tensors, dense=dequantize_weight(w))
    torch.testing.assert_close(qlinear_ref(x, cached, bias), out)


# ------------------------------------------------- Triton vs reference (interpreter on CPU)


@pytest.mark.parametrize("qtype", list(KERNEL_QTYPES), ids=lambda q: q.name)
@pytest.mark.parametrize("t", [1, 3, 16, 17, 64])
def test_triton_matches_reference_small(qtype: QT, t: int) -> None:
    qt = _triton()
    n = 48 if t in (1, 17) else 32  # 48 exercises the row tail of BN=32 blocks
    w = pack_weight(random_raw(qtype, n, 512, seed=t))
    x = torch.randn(t, 512, generator=torch.Generator().manual_seed(t))
    bias = torch.randn(n) if t % 2 else None
    out = qt.qlinear_triton(x, w, bias)
    assert out.shape == (t, n) and out.dtype == x.dtype
    ref = qlinear_ref(x, w, bias)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


@pytest.mark.parametrize("qtype", [QT.Q4_K, QT.Q6_K, QT.Q4_0], ids=lambda q: q.name)
@pytest.mark.parametrize(
    "cfg",
    [(1, 1, 4, 256, 2), (1, 16, 16, 256, 1), (1, 32, 16, 512, 2), (3, 1, 8, 256, 1)],
    ids=["vec-split", "dot16", "dot-split", "vec-rows"],
)
def test_triton_explicit_configs(qtype: QT, cfg: tuple[int, ...]) -> None:
    """The fused tensor-core GEMM and split-K paths that the heuristics may pick on a GPU."""
    qt = _triton()
    rows, bm, bn, tile, split = cfg
    mode = qt.MODE_VEC if bm == 1 else qt.MODE_DOT
    t = rows if bm == 1 else 40
    w = pack_weight(random_raw(qtype, 32, 512, seed=9))
    x = torch.randn(t, 512)
    bias = torch.randn(32)
    config = qt.QLinearConfig(mode, bm, bn, tile, split=split)
    out = qt.qlinear_launch(x, w, bias, config)
    ref = qlinear_ref(x, w, bias)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


@pytest.mark.parametrize("qtype", list(KERNEL_QTYPES), ids=lambda q: q.name)
@pytest.mark.parametrize(
    "cfg",
    [(1, 1, 8, 2), (1, 1, 4, 1), (5, 16, 16, 2), (2, 16, 32, 1)],
    ids=["vec-split", "vec", "dot-split", "dot"],
)
def test_triton_k_tail(qtype: QT, cfg: tuple[int, ...]) -> None:
    """K = 768 is not a multiple of the 512-element step: the last step runs masked."""
    qt = _triton()
    t, bm, bn, split = cfg
    mode = qt.MODE_VEC if bm == 1 else qt.MODE_DOT
    w = pack_weight(random_raw(qtype, 24, 768, seed=11))
    x = torch.randn(t, 768, generator=torch.Generator().manual_seed(3))
    config = qt.QLinearConfig(mode, bm, bn, 512, split=split)
    out = qt.qlinear_launch(x, w, None, config)
    ref = qlinear_ref(x, w)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


def test_pick_config_shapes() -> None:
    """Decode configs never step past K and split K only when rows are scarce."""
    qt = _triton()
    cpu = torch.device("cpu")
    for fmt in ("q8_0", "q4_0", "q4_k", "q5_k", "q6_k"):
        for n, k in ((4096, 4096), (4096, 11008), (16, 256)):
            for t in (1, 4, 16, 64):
                cfg = qt.pick_config(fmt, n, k, t, cpu)
                assert cfg.tile < 2 * k
                assert cfg.tile % qt.group_size(fmt) == 0
                # decode splits K only when rows are scarce
                assert cfg.split == 1 or n < 512


def test_triton_half_inputs_and_dense() -> None:
    qt = _triton()
    w = pack_weight(random_raw(QT.Q8_0, 32, 256, seed=4))
    # bf16 tl.dot is wrong in the Triton interpreter (numpy has no bf16): bf16 runs the GEMV
    # here and the tensor-core path in test_gpu_bf16
    for dtype, t in ((torch.float16, 2), (torch.bfloat16, 1)):
        x = torch.randn(t, 256).to(dtype)
        out = qt.qlinear_triton(x, w)
        assert out.dtype == dtype
        ref = qlinear_ref(x, w).float()
        torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2 * ref.abs().max().item())
    dense = pack_weight(random_raw(QT.Q5_1, 16, 256), dtype=torch.float32)
    x = torch.randn(3, 256)
    torch.testing.assert_close(qt.qlinear_triton(x, dense), qlinear_ref(x, dense))


def test_triton_rejects_bad_shapes() -> None:
    qt = _triton()
    w = pack_weight(random_raw(QT.Q4_0, 32, 256))
    with pytest.raises(ValueError, match="x must be"):
        qt.qlinear_triton(torch.randn(2, 128), w)
    with pytest.raises(ValueError, match="bias"):
        qt.qlinear_triton(torch.randn(2, 256), w, torch.randn(31))


# -------------------------------------- packed-fp16 GEMV (fp16 x): PTX text and data flow


GPU_SHAPES = [(4096, 4096), (6144, 4096), (4096, 14336), (4096, 11008)]


@pytest.mark.gpu
@pytest.mark.parametrize("qtype", list(KERNEL_QTYPES), ids=lambda q: q.name)
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_gpu_matches_reference(qtype: QT, shape: tuple[int, int]) -> None:
    """fp16 activations, fp32 accumulation: |out - ref| <= 1e-2 * |ref| + 3e-3 * max|ref|."""
    qt = _triton()
    n, k = shape
    w = pack_weight(random_raw(qtype, n, k, seed=n + k, scale=0.002), "cuda")
    wd = dequantize_weight(w)  # fp32 [n, k]
    gen = torch.Generator(device="cuda").manual_seed(0)
    for t in (1, 5, 16, 33, 100, 512):
        x = torch.randn(t, k, device="cuda", generator=gen).half()
        ref = x.float() @ wd.t()
        out = qt.qlinear_triton(x, w)
        assert out.dtype == torch.float16
        scale = ref.abs().max().item()
        torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=3e-3 * scale)


@pytest.mark.gpu
@pytest.mark.parametrize("t", [1, 16, 64])
def test_gpu_bf16(t: int) -> None:
    qt = _triton()
    w = pack_weight(random_raw(QT.Q5_K, 1024, 2048, seed=7, scale=0.002), "cuda")
    x = torch.randn(t, 2048, device="cuda").bfloat16()
    ref = x.float() @ dequantize_weight(w).t()
    out = qt.qlinear_triton(x, w)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=1e-2 * ref.abs().max().item())


@pytest.mark.gpu
@pytest.mark.parametrize("t", [1, 4, 16])
def test_gpu_cuda_graph_capture(t: int) -> None:
    qt = _triton()
    w = pack_weight(random_raw(QT.Q4_K, 2048, 4096, seed=1, scale=0.002), "cuda")
    x = torch.randn(t, 4096, device="cuda").half()
    bias = torch.randn(2048, device="cuda").half()
    expect = qt.qlinear_triton(x, w, bias)  # compiles outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = qt.qlinear_triton(x, w, bias)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    again = qt.qlinear_triton(x, w, bias)  # split-K atomics may sum in another order
    torch.testing.assert_close(out, again, rtol=1e-3, atol=1e-3 * again.abs().max().item())
    assert not torch.equal(out, expect)
