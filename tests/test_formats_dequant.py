"""formats.quants: torch dequantization is bit-exact with gguf-py's numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, quants

from localllm.errors import ModelLoadError
from localllm.formats.gguf import GGUFFile
from localllm.formats.quants import (
    LAYOUTS,
    SUPPORTED_QTYPES,
    check_supported,
    dequantize,
    dequantize_tensor,
)

Q = GGMLQuantizationType
QTYPES = sorted(SUPPORTED_QTYPES, key=lambda t: t.value)
SHAPES = [(1, 1), (3, 2), (2, 3, 4), (7, 5)]  # (*leading dims, blocks per row)


def random_blocks(qtype: Q, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """uint8 [*shape[:-1], shape[-1] * type_size]: random bytes, every fp16 field finite."""
    rng = np.random.default_rng(seed)
    lay = LAYOUTS[qtype]
    n_blocks = int(np.prod(shape))
    b = rng.integers(0, 256, (n_blocks, lay.type_size), dtype=np.uint8)
    if qtype in (Q.F32, Q.F16, Q.BF16):  # plain floats: random finite values of that width
        vals = (rng.standard_normal(n_blocks) * 3).astype(np.float32)
        b = {
            Q.F32: vals.view(np.uint8),
            Q.F16: vals.astype(np.float16).view(np.uint8),
            Q.BF16: (vals.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8),
        }[qtype].reshape(n_blocks, lay.type_size)
    for off in lay.f16_fields:
        scale = rng.uniform(-4, 4, (n_blocks, 1)) * 10.0 ** rng.integers(-6, 2, (n_blocks, 1))
        b[:, off : off + 2] = scale.astype(np.float16).view(np.uint8)
    return b.reshape(*shape[:-1], shape[-1] * lay.type_size)


def assert_bit_exact(got: torch.Tensor, ref: np.ndarray) -> None:
    got_np = got.cpu().numpy()
    assert got.dtype == torch.float32 and got_np.shape == ref.shape
    mismatch = np.flatnonzero(got_np.view(np.uint32) != ref.astype(np.float32).view(np.uint32))
    assert mismatch.size == 0, f"{mismatch.size} differing values, first at {mismatch[:5]}"


def test_layout_table_matches_gguf_sizes() -> None:
    from gguf import GGML_QUANT_SIZES

    for qtype, lay in LAYOUTS.items():
        assert (lay.block_size, lay.type_size) == GGML_QUANT_SIZES[qtype]
        assert all(0 <= off <= lay.type_size - 2 for off in lay.f16_fields)


@pytest.mark.parametrize("qtype", QTYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_dequantize_bit_exact_cpu(qtype: Q, shape: tuple[int, ...]) -> None:
    data = random_blocks(qtype, shape, seed=hash((qtype.value, shape)) & 0xFFFF)
    ref = quants.dequantize(data, qtype)
    assert_bit_exact(dequantize(torch.from_numpy(data), qtype), ref)


@pytest.mark.parametrize("qtype", [Q.Q4_K, Q.Q6_K, Q.Q8_0], ids=lambda t: t.name)
def test_dequantize_many_blocks(qtype: Q) -> None:
    """Enough blocks to hit every byte value in every position."""
    data = random_blocks(qtype, (64, 40), seed=7)
    assert_bit_exact(dequantize(torch.from_numpy(data), qtype), quants.dequantize(data, qtype))


def test_float_payloads_accept_their_own_dtype() -> None:
    x = torch.randn(3, 8)
    assert torch.equal(dequantize(x, Q.F32), x)
    assert torch.equal(dequantize(x.half(), Q.F16), x.half().float())
    assert torch.equal(dequantize(x.bfloat16(), Q.BF16), x.bfloat16().float())


def test_dequantize_rejects_partial_blocks_and_unsupported_types() -> None:
    with pytest.raises(ValueError, match="whole"):
        dequantize(torch.zeros(2, 17, dtype=torch.uint8), Q.Q4_0)
    with pytest.raises(ValueError, match="IQ2_XS"):
        dequantize(torch.zeros(2, 74, dtype=torch.uint8), Q.IQ2_XS)


def test_check_supported_message() -> None:
    check_supported(Q.Q4_K, "m.gguf", "blk.0.attn_q.weight")
    with pytest.raises(ModelLoadError) as e:
        check_supported(Q.IQ2_XS, "m.gguf", "blk.0.attn_q.weight")
    assert str(e.value) == "m.gguf: unsupported quant type IQ2_XS in tensor 'blk.0.attn_q.weight'"
    with pytest.raises(ModelLoadError, match="id 250"):
        check_supported(250, "m.gguf", "x")


@pytest.mark.parametrize("name", ["pycode-22m-q4_k_m.gguf", "pycode-22m-q8_0.gguf"])
def test_real_files_every_tensor_bit_exact(testdata, name: str) -> None:
    g = GGUFFile(testdata / "models" / name)
    seen = set()
    for raw in g.tensors.values():
        ref = quants.dequantize(raw.data, raw.qtype).reshape(raw.shape)
        assert_bit_exact(dequantize_tensor(raw), ref)
        seen.add(raw.qtype)
    expected = {Q.Q4_K, Q.Q6_K, Q.F32} if "q4_k_m" in name else {Q.Q8_0, Q.F32}
    assert seen == expected


def test_f16_file_tensors(testdata) -> None:
    g = GGUFFile(testdata / "models" / "llama-2-tiny-random.gguf")
    raw = g.tensor("token_embd.weight")
    assert raw.qtype == Q.F16
    out = dequantize_tensor(raw)
    assert out.shape == (32000, 8)
    assert_bit_exact(out, raw.data.astype(np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("qtype", QTYPES, ids=lambda t: t.name)
def test_dequantize_bit_exact_cuda(qtype: Q) -> None:
    data = random_blocks(qtype, (33, 9), seed=qtype.value)
    ref = quants.dequantize(data, qtype)
    assert_bit_exact(dequantize(torch.from_numpy(data).cuda(), qtype), ref)


@pytest.mark.gpu
def test_dequantize_tensor_cuda(testdata) -> None:
    g = GGUFFile(testdata / "models" / "pycode-22m-q4_k_m.gguf")
    for raw in g.tensors.values():
        out = dequantize_tensor(raw, "cuda")
        assert out.is_cuda
        assert_bit_exact(out, quants.dequantize(raw.data, raw.qtype).reshape(raw.shape))
