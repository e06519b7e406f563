"""The fused dequant-GEMM (kernels/linear/qmm_triton.py) against the torch reference: every
format, explicit configs (split K, swapped operands, K steps of 4-16 groups), bias, row and
batch tails. On CPU under TRITON_INTERPRET=1; on the GPU over 7-8B shapes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from gguf import GGMLQuantizationType as QT
from test_kernels_qlinear import KERNEL_QTYPES, random_raw  # shared fixtures of the qlinear tests

from localllm.kernels.device import device_props
from localllm.kernels.linear.qlinear import dequantize_weight, pack_weight, qlinear_ref
from localllm.kernels.quant import kernel_facts

mm = pytest.importorskip("localllm.kernels.linear.qmm_triton")

CONFIGS = [
    mm.MMConfig(16, 32, 4),
    mm.MMConfig(32, 16, 8, split=3, swap=True),
    mm.MMConfig(16, 64, 16, split=2, warps=8, stages=2),
    mm.MMConfig(64, 128, 8, warps=8, swap=True, stages=4),
    mm.MMConfig(128, 64, 8, split=2, warps=8, swap=True),  # the 65..128-row heuristic's shape
    mm.MMConfig(16, 32, 4, prefetch=True),  # scales a step ahead, over 8 steps
    mm.MMConfig(32, 64, 8, split=3, swap=True, stages=2, prefetch=True),  # uneven splits
    mm.MMConfig(64, 64, 4, split=4, swap=True, stages=4, prefetch=True),  # 33..64-row split-K tile
    mm.MMConfig(128, 64, 8, split=2, warps=8, swap=True, ahead=True),  # next tile decoded ahead
    mm.MMConfig(16, 32, 4, split=3, ahead=True),  # uneven splits, x as the A operand
    # stream-K: 2 x 2 tiles x 8 K steps over 5 programs (segments of 7, 6 and 1 step, tiles
    # shared by 2-3 programs), over 3 (one program holds a whole tile), and one per tile
    mm.MMConfig(16, 32, 4, swap=True, streamk=5),
    mm.MMConfig(16, 32, 4, streamk=3),
    mm.MMConfig(32, 64, 8, swap=True, streamk=2),
]


@pytest.mark.parametrize("qtype", list(KERNEL_QTYPES), ids=lambda q: q.name)
@pytest.mark.parametrize(
    "cfg",
    CONFIGS,
    ids=lambda c: (
        f"bm{c.bm}-bn{c.bn}-ng{c.ng}-s{c.split}"
        + "-pf" * c.prefetch
        + "-ah" * c.ahead
        + f"-sk{c.streamk}" * bool(c.streamk)
    ),
)
def test_qmm_matches_reference(qtype: QT, cfg: mm.MMConfig) -> None:
    fmt = KERNEL_QTYPES[qtype]
    t, n, k = 19, 48, 1024  # 19 rows: two M blocks of 16; 48: a row tail of BN=32/64
    w = pack_weight(random_raw(qtype, n, k, seed=cfg.bm + cfg.ng))
    gen = torch.Generator().manual_seed(cfg.bn)
    x = torch.randn(t, k, generator=gen)
    bias = torch.randn(n, generator=gen)
    out = mm.qmm_launch(x, [w.tensors[p] for p in kernel_facts(fmt).planes], fmt, n, bias, cfg)
    ref = qlinear_ref(x, w, bias)
    assert out.shape == (t, n) and out.dtype == x.dtype
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


def test_qmm_heuristic_shapes() -> None:
    sms, smem = 132, 227 * 1024  # H200
    small = mm.mm_config("q4_k", 1024, 4096, 8, sms, smem, 90)
    assert small.bm == 16 and small.split > 1  # 8 row blocks: split K to fill the SMs
    big = mm.mm_config("q4_k", 28672, 4096, 32, sms, smem, 90)
    assert big.bm == 32 and big.swap and big.split <= 2
    c100 = mm.plain_mm_config("q4_k", 4096, 4096, 100, sms, smem, 90)  # one 128-row block
    assert (c100.bm, c100.warps, c100.split, c100.streamk) == (128, 8, 2, 0)  # 64 x 2 <= 132 SMs
    assert mm.plain_mm_config("q4_k", 6144, 4096, 128, sms, smem, 90).split == 1  # 96 programs
    # 65..128 rows on a stream-K schedule where the format's wave span says (Tuning.streamk_waves):
    # Q4_0, Q4_K and Q6_K from 0.7 to 2 waves of plain programs; not the LM head's 7.6 waves,
    # nor formats without a span
    for fmt, n, k, t, programs in (
        ("q4_0", 12288, 4096, 100, 132),
        ("q4_0", 22016, 4096, 65, 132),
        ("q4_0", 4096, 11008, 100, 132),
        ("q4_k", 28672, 4096, 100, 132),
        ("q4_k", 6144, 4096, 128, 132),
        ("q6_k", 4096, 14336, 128, 132),
        ("q6_k", 128256, 4096, 100, 0),
        ("q8_0", 4096, 4096, 100, 0),
    ):
        cfg = mm.mm_config(fmt, n, k, t, sms, smem, 90)
        assert cfg.streamk == programs and (cfg.split == 1 or not programs), (fmt, n, k, t, cfg)
    assert mm.mm_config("q4_0", 12288, 4096, 64, sms, smem, 90).streamk == 0  # 33..64 rows
    assert (
        mm.mm_config("q8_0", 64, 96, 2, sms, smem, 90).ng == 1
    )  # K = 3 groups: one group per step
    assert big.bn == 128 and mm.mm_config("q4_k", 28672, 4096, 32, 82, 99 * 1024, 86).bn == 64
    # 33..64 rows: the deepest pipeline whose programs are all resident (`_wave_config`)
    MM = mm.MMConfig
    h100 = (132, 227 * 1024, 90)
    assert mm.mm_config("q4_k", 28672, 4096, 64, *h100) == MM(64, 128, 8, 1, 4, 2, True, False)
    assert mm.mm_config("q4_0", 22016, 4096, 64, *h100) == MM(64, 64, 4, 1, 4, 3, True, True)
    # below 16384 rows: 64 x 64 tiles, split K to two programs per SM (64 tiles x 4 splits);
    # no scale prefetch for formats with a per-group min
    assert mm.mm_config("q4_k", 4096, 14336, 64, *h100) == MM(64, 64, 8, 4, 4, 2, True, False)
    assert mm.mm_config("q4_0", 4096, 4096, 40, *h100) == MM(64, 64, 4, 4, 4, 4, True, True)
    # 192 tiles: no split, 128-K steps let 2 programs per SM keep 4 stages
    assert mm.mm_config("q4_0", 12288, 4096, 64, *h100) == MM(64, 64, 4, 1, 4, 4, True, True)
    # 16 tiles x 8 splits: one program per SM, two warpgroups
    assert mm.mm_config("q6_k", 1024, 4096, 64, *h100) == MM(64, 64, 8, 8, 8, 4, True, True)
    # 99 KB (sm_86 / sm_89 allocation): 256 programs on 128 SMs are resident at 2 stages
    assert mm.mm_config("q4_0", 4096, 4096, 64, 128, 99 * 1024, 89) == MM(
        64, 64, 4, 4, 4, 2, True, False
    )  # no scale prefetch below sm_90
    # nothing fits in one wave: the fewest waves (128 rows: 2 programs per SM)
    assert mm.mm_config("q6_k", 128256, 4096, 64, *h100).bn == 128
    # 17..32 rows: one wave for tall matrices only; the others keep split K, 4 stages where
    # all programs stay resident with them, the scale prefetch on sm_90
    assert mm.mm_config("q4_0", 22016, 4096, 32, *h100) == MM(32, 64, 8, 1, 4, 3, True, True)
    assert mm.mm_config("q4_k", 4096, 14336, 32, *h100) == MM(32, 64, 8, 4, 4, 4, True, True)
    assert mm.mm_config("q4_k", 6144, 4096, 32, *h100) == MM(32, 64, 8, 4, 4, 3, True, True)
    assert mm.mm_config("q4_k", 6144, 4096, 32, 128, 99 * 1024, 89).prefetch is False
    assert mm.mm_config("q6_k", 4096, 14336, 32, *h100) == MM(32, 64, 8, 4, 4, 3, True, True)
    # up to 16 rows: the prefetch for 4-bit formats where all programs stay resident with it,
    # 3 per SM (measured slower for Q6_K, and for 448 programs of Q4_0 / Q4_K 28672 rows)
    assert mm.mm_config("q4_k", 4096, 14336, 16, *h100).prefetch  # 64 tiles x 4 splits
    assert not mm.mm_config("q6_k", 4096, 14336, 16, *h100).prefetch
    assert not mm.mm_config("q4_k", 28672, 4096, 16, *h100).prefetch
    assert not mm.mm_config("q4_0", 28672, 4096, 8, *h100).prefetch
    assert mm.mm_config("q4_0", 22016, 4096, 8, *h100) == MM(16, 64, 8, 1, 4, 3, True, True)


def test_qmm_shrinks_configs_that_do_not_fit(monkeypatch) -> None:
    """A config needing more shared memory than the GPU has (RTX 30xx/40xx: 99 KB per block)
    falls back to fewer stages, then fewer rows, and the fitted config is remembered."""
    import triton

    tried = []
    real = mm._launch

    def launch(x, planes, fmt, n, bias, cfg):
        tried.append(cfg)
        if cfg.stages > 2 or cfg.bn > 32:
            raise triton.runtime.errors.OutOfResources(100_000, 99 * 1024, "shared memory")
        return real(x, planes, fmt, n, bias, cfg)

    monkeypatch.setattr(mm, "_launch", launch)
    monkeypatch.setattr(mm, "_FITTED", {})
    w = pack_weight(random_raw(QT.Q4_K, 40, 256, seed=3))
    x = torch.randn(5, 256)
    cfg = mm.MMConfig(16, 64, 8, stages=3, swap=True)
    out = mm.qmm_launch(
        x, [w.tensors[p] for p in kernel_facts("q4_k").planes], "q4_k", 40, None, cfg
    )
    torch.testing.assert_close(out, qlinear_ref(x, w, None), rtol=1e-4, atol=1e-3)
    assert [(c.stages, c.bn) for c in tried] == [(3, 64), (2, 64), (2, 32)]
    tried.clear()
    mm.qmm_launch(x, [w.tensors[p] for p in kernel_facts("q4_k").planes], "q4_k", 40, None, cfg)
    assert [(c.stages, c.bn) for c in tried] == [(2, 32)]


class _Compiled:
    def __init__(self, spilled_bytes: int | None) -> None:
        self.n_spills = None if spilled_bytes is None else spilled_bytes // 4  # Triton: words


@pytest.mark.parametrize("roomier_spills", [False, True])
def test_qmm_widens_configs_that_spill(monkeypatch, roomier_spills: bool) -> None:
    """A config whose program spills registers at its first launch is tried with twice the
    warps; the wider one is remembered only if it does not spill, and the check runs once."""
    tried = []
    real = mm._launch

    def launch(x, planes, fmt, n, bias, cfg):
        tried.append(cfg.warps)
        out, _ = real(x, planes, fmt, n, bias, cfg)
        return out, _Compiled(400 if cfg.warps == 4 or roomier_spills else 0)

    monkeypatch.setattr(mm, "_launch", launch)
    monkeypatch.setattr(mm, "_FITTED", {})
    w = pack_weight(random_raw(QT.Q4_K, 40, 256, seed=3))
    planes = [w.tensors[p] for p in kernel_facts("q4_k").planes]
    x = torch.randn(5, 256)
    cfg = mm.MMConfig(16, 64, 8, stages=3, warps=4, swap=True)
    for _ in range(3):
        out = mm.qmm_launch(x, planes, "q4_k", 40, None, cfg)
        torch.testing.assert_close(out, qlinear_ref(x, w, None), rtol=1e-4, atol=1e-3)
    kept = 4 if roomier_spills else 8
    assert tried == [4, 8, kept, kept]
    assert mm._roomier(mm.MMConfig(16, 64, 8, warps=8)) == []
    two = mm.MMConfig(64, 128, 8, warps=4, stages=2)  # 3 stages first, then its own 2
    assert [(c.warps, c.stages) for c in mm._roomier(two)] == [(8, 3), (8, 2)]
    # a spill within SPILL_TOLERANCE (Triton 3.6's tuned 64 x 128 tiles: 48-64 B) is kept
    assert not mm._spills(_Compiled(64)) and not mm._spills(_Compiled(mm.SPILL_TOLERANCE))
    assert mm._spills(_Compiled(432))  # Triton 3.9's 32 x 128 tiles
    assert not mm._spills(None) and not mm._spills(_Compiled(None))


def _gpu_case(qtype: QT, t: int) -> tuple:
    """(format, weight, x [t, 4096] fp16, the fp32 reference, the dispatch's config, GPU) of a
    7-8B shape (6144 x 4096) on the GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    fmt = KERNEL_QTYPES[qtype]
    n, k = 6144, 4096
    w = pack_weight(random_raw(qtype, n, k, seed=t, scale=0.002), "cuda")
    x = torch.randn(t, k, device="cuda").half()
    ref = x.float() @ dequantize_weight(w).t()
    props = device_props(x.device)
    cfg = mm.mm_config(fmt, n, k, t, props.sm_count, props.smem_per_block, props.arch)
    return fmt, w, x, ref, cfg, props


@pytest.mark.gpu
@pytest.mark.parametrize("qtype", list(KERNEL_QTYPES), ids=lambda q: q.name)
@pytest.mark.parametrize("t", [64, 100])
def test_gpu_qmm_streamk_matches_reference(qtype: QT, t: int) -> None:
    """The stream-K form of the dispatch's config (one program per resident slot, as
    `scripts/wave_fill_configs.py --streamk` times it) on a 7-8B shape, twice in a row: the
    workspace and counters it leaves are zero for the next launch."""
    fmt, w, x, ref, cfg, props = _gpu_case(qtype, t)
    programs = mm._per_sm(fmt, cfg, props.smem_per_block, props.arch) * props.sm_count
    cfg = replace(cfg, split=1, streamk=programs)
    for _ in range(2):
        out = mm.qmm_launch(x, [w.tensors[p] for p in kernel_facts(fmt).planes], fmt, 6144, None,
                            cfg)  # fmt: skip
        torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=3e-3 * ref.abs().max().item())
    assert all(int(b.abs().sum()) == 0 for b in mm._WORKSPACE.buffers())
    assert all(int(b.abs().sum()) == 0 for b in mm._COUNTERS.buffers())


@pytest.mark.gpu
@pytest.mark.parametrize("qtype", list(KERNEL_QTYPES), ids=lambda q: q.name)
@pytest.mark.parametrize("t", [2, 8, 32, 64, 100, 128])
def test_gpu_qmm_matches_reference(qtype: QT, t: int) -> None:
    fmt, w, x, ref, cfg, _ = _gpu_case(qtype, t)
    out = mm.qmm_launch(x, [w.tensors[p] for p in kernel_facts(fmt).planes], fmt, 6144, None, cfg)
    torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=3e-3 * ref.abs().max().item())


def test_split_k_leaves_its_workspace_zeroed() -> None:
    """Split K adds into a persistent fp32 workspace that the last split of each tile converts
    and zeroes again: repeated calls of different shapes agree with the reference, and the
    workspace and tile counters are all zero afterwards (CUDA graphs replay on them as is)."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    for n, t, split, streamk in ((48, 19, 3, 0), (80, 5, 2, 0), (48, 19, 3, 0), (80, 19, 1, 4)):
        w = pack_weight(random_raw(QT.Q4_K, n, 512, seed=n), dev)
        x = torch.randn(t, 512, generator=torch.Generator().manual_seed(t)).to(dev)
        cfg = mm.MMConfig(16, 32, 8, split=split, swap=True, streamk=streamk)
        out = mm.qmm_launch(
            x, [w.tensors[p] for p in kernel_facts("q4_k").planes], "q4_k", n, None, cfg
        )
        ref = qlinear_ref(x, w, None)
        torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3 * ref.abs().max().item())
    assert all(int(b.abs().sum()) == 0 for b in mm._WORKSPACE.buffers())
    assert all(int(b.abs().sum()) == 0 for b in mm._COUNTERS.buffers())


@pytest.mark.parametrize("fmt_qtype", [QT.Q4_0, QT.Q4_K], ids=lambda q: q.name)
def test_qmm_scale_prefetch_one_step(fmt_qtype: QT) -> None:
    """The scale prefetch when a program has one K step only (K = 256, 8 groups a step): the
    prefetch of the step after the last reloads the same scales, the result is unchanged."""
    fmt = KERNEL_QTYPES[fmt_qtype]
    w = pack_weight(random_raw(fmt_qtype, 40, 256, seed=5))
    x = torch.randn(17, 256, generator=torch.Generator().manual_seed(5))
    planes = [w.tensors[p] for p in kernel_facts(fmt).planes]
    ref = qlinear_ref(x, w, None)
    for split in (1, 2):  # two splits of Q4_0's 8 groups: one 4-group step each
        cfg = mm.MMConfig(32, 32, 8 if split == 1 else 4, split=split, stages=2, prefetch=True)
        out = mm.qmm_launch(x, planes, fmt, 40, None, cfg)
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


def test_qmm_smem_follows_the_arch() -> None:
    """`mm_smem` against what Triton 3.6 allocated when these configs were compiled (sm_90:
    `stages` x buffers, swapped weights in registers; sm_86: `stages - 1`, the decoded tile in
    shared memory), to within 8% (sm_90 swapped 128-row tiles: 82 vs 89 KB)."""
    MM = mm.MMConfig
    compiled = [  # (format, config, arch, bytes allocated)
        ("q4_k", MM(64, 32, 8, stages=2), 90, 85 * 1024),
        ("q4_k", MM(64, 32, 8, stages=3), 90, 121 * 1024),
        ("q4_k", MM(64, 128, 8, stages=2, swap=True), 90, 89 * 1024),
        ("q4_0", MM(64, 32, 4, stages=3), 90, 61 * 1024),
        ("q4_k", MM(64, 32, 8, stages=2), 86, 52 * 1024),
        ("q4_k", MM(64, 128, 8, stages=2, swap=True), 86, 112 * 1024),
        ("q6_k", MM(64, 32, 8, stages=3), 86, 92 * 1024),
    ]
    for fmt, cfg, arch, real in compiled:
        assert abs(mm.mm_smem(fmt, cfg, arch) - real) <= 0.08 * real, (fmt, cfg, arch)
