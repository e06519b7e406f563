"""Grammar masks + greedy token on the device: the Triton kernel vs the torch reference vs the
host path it replaces (mask the rows, then the sampler's argmax), with random logits and
masks, a mask with one allowed token, an all-zero mask, ties, NaN, and bitmask words that
cover more bits than the vocabulary (or fewer columns than the logits). On CPU under
TRITON_INTERPRET=1; on the GPU at the 128k vocabulary too."""

from __future__ import annotations

import pytest
import torch

from localllm.kernels.fused.masked_argmax import unpack_bitmask
from localllm.kernels.registry import Ops, triton_available

REF = Ops("reference")
DEV = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not triton_available(), reason="triton is not installed")


def pack(allowed: torch.Tensor, words: int) -> torch.Tensor:
    """[R, N] bool -> [R, words] int32 in llguidance's layout (bit i & 31 of word i >> 5)."""
    bits = torch.zeros(allowed.shape[0], words * 32, dtype=torch.int64)
    bits[:, : allowed.shape[1]] = allowed.long()
    weights = torch.tensor([1 << b for b in range(32)], dtype=torch.int64)
    packed = (bits.view(-1, words, 32) * weights).sum(-1)  # [R, words] as unsigned
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


def host_path(logits: torch.Tensor, allowed: torch.Tensor, rows: list[int]) -> list[int]:
    """What the engine did before: -inf where the mask forbids, then torch's argmax."""
    out = []
    for k, r in enumerate(rows):
        row = logits[r].float().clone()
        row[~allowed[k, : logits.shape[1]]] = float("-inf")
        out.append(int(row.argmax()))
    return out


def case(s: int, v: int, words: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(s, v, generator=g)
    rows = torch.randperm(s, generator=g)[: max(1, s - 2)]
    allowed = torch.rand(len(rows), words * 32, generator=g) < 0.3  # bits past V set too
    allowed[0] = False
    allowed[0, min(v, words * 32) - 1] = True  # one allowed token: the last that can be
    if len(rows) > 1:
        allowed[1] = False  # nothing allowed: index 0, like torch
    if len(rows) > 2:
        allowed[2, :] = True
        logits[rows[2], :] = 1.0  # all tied: the first column
    if len(rows) > 3:
        logits[rows[3], :] = float("nan")  # forbidden NaNs are -inf; an allowed one wins
        logits[rows[3], 5] = float("nan")
        allowed[3, 5] = True
    if len(rows) > 4 and v > 8192:  # a tie across blocks: the first block's
        logits[rows[4], [100, 4100, 8191]] = 50.0
        allowed[4, [100, 4100, 8191]] = True
    return logits, allowed, rows


@pytest.mark.parametrize("backend", ["reference", pytest.param("triton", marks=needs_triton)])
@pytest.mark.parametrize(
    ("s", "v", "words"),
    [(6, 100, 4), (7, 9000, 282), (4, 4200, 120)],  # 128 bits > 100; 4200 > 120*32 columns
)
def test_masked_argmax_matches_the_host_path(backend: str, s: int, v: int, words: int) -> None:
    logits, allowed, rows = case(s, v, words, seed=v)
    full = torch.cat([allowed, allowed.new_zeros(len(rows), max(0, v - words * 32))], 1)
    want = host_path(logits, full, rows.tolist())
    bitmask = pack(allowed, words)
    x = logits.to(DEV)
    out = torch.full((s + 3,), -7, dtype=torch.int64, device=DEV)  # a graph bucket is wider
    Ops(backend).masked_argmax(x, bitmask.to(DEV), rows.to(DEV), out)
    got = out.cpu()
    assert got[rows].tolist() == want
    untouched = [i for i in range(s + 3) if i not in rows.tolist()]
    assert (got[untouched] == -7).all()
    x = x.cpu()
    free = [i for i in range(s) if i not in rows.tolist()]
    assert torch.equal(x[free], logits[free])  # rows without a mask are not touched
    for k, r in enumerate(rows.tolist()):  # the named rows now carry the mask
        keep = full[k, :v]
        assert torch.isinf(x[r][~keep]).all() and (x[r][~keep] < 0).all()
        assert torch.allclose(x[r][keep], logits[r][keep], equal_nan=True)


@pytest.mark.parametrize("backend", ["reference", pytest.param("triton", marks=needs_triton)])
def test_masked_argmax_checks_its_arguments(backend: str) -> None:
    op = Ops(backend).masked_argmax
    x, m = torch.zeros(3, 40, device=DEV), torch.zeros(2, 2, dtype=torch.int32, device=DEV)
    rows, out = torch.tensor([0, 2], device=DEV), torch.zeros(3, dtype=torch.int64, device=DEV)
    with pytest.raises(ValueError, match="rows"):
        op(x, m, rows[:1], out)
    with pytest.raises(ValueError, match="bitmask"):
        op(x, m.float(), rows, out)
    with pytest.raises(ValueError, match="out"):
        op(x, m, rows, out[:2])
    op(x, m[:0], rows[:0], out)  # no constrained row: nothing happens
    assert out.tolist() == [0, 0, 0] and not torch.isinf(x).any()


def test_unpack_bitmask_layout() -> None:
    allowed = torch.zeros(1, 64, dtype=torch.bool)
    allowed[0, [0, 31, 33]] = True
    assert unpack_bitmask(pack(allowed, 2), 70)[0].nonzero().flatten().tolist() == [0, 31, 33]


@pytest.mark.gpu
def test_gpu_masked_argmax_vocab_128k() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    v, words = 128256, 4008
    logits, allowed, rows = case(16, v, words, seed=1)
    bitmask = pack(allowed, words).cuda()
    a, b = logits.cuda(), logits.cuda()
    out_t = torch.zeros(16, dtype=torch.int64, device="cuda")
    out_r = out_t.clone()
    Ops("triton").masked_argmax(a, bitmask, rows.cuda(), out_t)
    REF.masked_argmax(b, bitmask, rows.cuda(), out_r)
    assert out_t.tolist() == out_r.tolist()
    assert torch.allclose(a, b, equal_nan=True)  # the same masked logits
