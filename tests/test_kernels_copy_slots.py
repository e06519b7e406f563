"""copy_slots: a block's leading KV slots into another block, all layers, K and V (and the
scales of a quantized cache): Triton against the torch reference. On CPU under
TRITON_INTERPRET=1; on the GPU also past 2^31 elements (64-bit offsets)."""

from __future__ import annotations

import pytest
import torch

from localllm.kernels.registry import Ops, triton_available

REF = Ops("reference")
DEV = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not triton_available(), reason="triton is not installed")


def _pool(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-100, 100, shape, generator=g).to(dtype).to(DEV)


@needs_triton
@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((2, 2, 5, 3, 8, 16), torch.float16),  # K/V: [L, 2, blocks, H, block_size, D]
        ((2, 2, 5, 3, 8, 16), torch.int8),
        ((3, 2, 5, 2, 64, 32), torch.float32),
        ((2, 2, 5, 3, 8), torch.float32),  # scales: [L, 2, blocks, H, block_size]
    ],
)
@pytest.mark.parametrize(("src", "dst", "n"), [(1, 3, 5), (4, 0, 1), (2, 2, 3), (0, 1, 0)])
def test_copy_slots_matches_reference(shape, dtype, src, dst, n) -> None:
    n = min(n, shape[4])
    want, got = _pool(shape, dtype, 1), _pool(shape, dtype, 1)
    REF.copy_slots(want, src, dst, n)
    Ops("triton").copy_slots(got, src, dst, n)
    assert torch.equal(got, want)
    if n and src != dst:  # the copy happened, and only into the first n slots of dst
        assert torch.equal(got[:, :, dst, :, :n], got[:, :, src, :, :n])
        assert torch.equal(got[:, :, dst, :, n:], _pool(shape, dtype, 1)[:, :, dst, :, n:])


@needs_triton
def test_copy_slots_refuses_bad_blocks() -> None:
    pool = _pool((1, 2, 3, 1, 4, 2), torch.float16, 0)
    for ops in (REF, Ops("triton")):
        with pytest.raises(ValueError, match="copy_slots"):
            ops.copy_slots(pool, 0, 3, 2)
        with pytest.raises(ValueError, match="copy_slots"):
            ops.copy_slots(pool, 0, 1, 5)
    with pytest.raises(ValueError, match="contiguous"):
        Ops("triton").copy_slots(_pool((1, 2, 3, 1, 4, 4), torch.float16, 0)[..., ::2], 0, 1, 2)


@pytest.mark.gpu
def test_gpu_copy_slots_past_2_31_elements() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    # int8 KV of 32 layers x 8 heads x 64 x 128 in 1,100 blocks: 4.6e9 elements
    pool = torch.zeros((32, 2, 1100, 8, 64, 128), dtype=torch.int8, device="cuda")
    src, dst = 1099, 7
    pool[:, :, src, :, :48] = torch.randint(-100, 100, (32, 2, 8, 48, 128), dtype=torch.int8,
                                            device="cuda")  # fmt: skip
    Ops("triton").copy_slots(pool, src, dst, 48)
    assert torch.equal(pool[:, :, dst, :, :48], pool[:, :, src, :, :48])
    assert not pool[:, :, dst, :, 48:].any()


@needs_triton
def test_copy_slots_from_and_to_block_one() -> None:
    """Block ids are runtime values: 1 is not specialized into a constant (a compile error once:
    `int` has no `.to`)."""
    want, got = (
        _pool((2, 2, 3, 2, 4, 8), torch.float16, 2),
        _pool((2, 2, 3, 2, 4, 8), torch.float16, 2),
    )
    for src, dst in ((1, 0), (2, 1)):
        REF.copy_slots(want, src, dst, 1)
        Ops("triton").copy_slots(got, src, dst, 1)
    assert torch.equal(got, want)
