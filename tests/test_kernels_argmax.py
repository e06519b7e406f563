"""Greedy argmax over logits rows: Triton (two passes over 4096-column blocks) vs torch, with
ties (the first index wins, across and inside blocks), -inf columns and a row tail. On CPU
under TRITON_INTERPRET=1; on the GPU at the 128k vocabulary too."""

from __future__ import annotations

import pytest
import torch

from localllm.kernels.registry import Ops, triton_available

REF = Ops("reference")
DEV = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not triton_available(), reason="triton is not installed")


def _logits(s: int, v: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(s, v, generator=g).to(DEV)


@needs_triton
@pytest.mark.parametrize("v", [7, 4096, 9000])
def test_argmax_matches_torch(v: int) -> None:
    x = _logits(5, v, v)
    x[1, :] = float("-inf")  # all -inf: index 0, like torch
    x[1, v // 2] = 0.0
    x[2, :] = 1.0  # all tied: the first column
    if v > 4096:
        x[3, 4100] = x[3, 8191] = x[3, 100] = 50.0  # tie across blocks: the first block's
        x[4, 5000] = x[4, 5001] = 60.0  # tie inside a block
    x[0, v - 1] = float("nan")  # NaN is the maximum, as in torch (random 8B weights overflow)
    got = Ops("triton").argmax(x)
    assert got.dtype == torch.int64 and got.tolist() == REF.argmax(x).tolist()


@needs_triton
def test_argmax_strided_rows_and_empty() -> None:
    x = _logits(3, 2 * 300, 1)[:, ::2]  # non-unit column stride
    assert Ops("triton").argmax(x).tolist() == x.argmax(-1).tolist()
    assert Ops("triton").argmax(torch.empty(0, 10, device=DEV)).shape == (0,)
    with pytest.raises(ValueError, match="argmax"):
        Ops("triton").argmax(torch.zeros(3, device=DEV))


@pytest.mark.gpu
def test_gpu_argmax_vocab_128k() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    x = torch.randn(64, 128256, device="cuda")
    x[7, 128255] = 100.0
    assert Ops("triton").argmax(x).tolist() == x.argmax(-1).tolist()
