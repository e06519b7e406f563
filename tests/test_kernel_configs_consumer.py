"""Kernel configs on consumer GPUs (RTX 30xx sm_86, RTX 40xx sm_89): the launch rules choose
from the device's properties, and every config the dispatch can choose compiles for sm_86
and sm_89 within their shared memory and registers (`scripts/check_consumer_configs.py`;
CI compiles a representative subset, the script the full set)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from localllm.kernels.attention.paged_triton import attn_smem, plan_launch, target_programs
from localllm.kernels.device import CONSUMER, INTERPRETER, PROFILES, device_props, profile
from localllm.kernels.linear.dp4a_triton import dp4a_config
from localllm.kernels.linear.gemv_triton import pick_config
from localllm.kernels.linear.qmm_triton import MMConfig, mm_config, mm_smem, plain_mm_config
from localllm.kernels.quant import KERNEL_FORMATS

REPO = Path(__file__).resolve().parents[1]
SHAPES = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096), (256, 1536)]


def test_profiles_carry_the_published_limits() -> None:
    for name in CONSUMER:
        p = profile(name)
        assert p.arch in (86, 89) and p.smem_per_block == 99 * 1024 and p.regs_per_sm == 65536
    assert profile("h200").smem_per_block == 227 * 1024 and profile("h200").sm_count == 132
    assert profile("rtx4090").l2_bytes == 72 * 2**20 and profile("rtx3060").sm_count == 28
    with pytest.raises(ValueError, match="unknown GPU profile 'gtx1080'"):
        profile("gtx1080")
    assert device_props(torch.device("cpu")) is INTERPRETER


@pytest.mark.parametrize("name", CONSUMER)
def test_fused_gemm_tiles_fit_the_gpu(name: str) -> None:
    p = profile(name)
    for fmt in KERNEL_FORMATS:
        for n, k in SHAPES:
            for t in range(2, 129):
                cfg = mm_config(fmt, n, k, t, p.sm_count, p.smem_per_block, p.arch)
                assert mm_smem(fmt, cfg, p.arch) <= p.smem_per_block, (fmt, n, k, t, cfg)
                assert cfg.bm >= min(t, 16) and cfg.stages >= 2


def test_fused_gemm_keeps_the_h200_choices() -> None:
    """The tuned H200 configs: 3 stages, 128 weight rows for tall matrices from 32 rows; the
    128 x 128 tile of 65+ rows runs 2 stages (3 stages need 250-300 KB on sm_90, which the
    launch fallback used to find at the first call)."""
    h = profile("h200")
    assert mm_config("q4_k", 28672, 4096, 32, h.sm_count, h.smem_per_block, h.arch) == MMConfig(
        32, 128, 8, 1, 4, 3, True
    )
    assert mm_config("q4_k", 28672, 4096, 100, h.sm_count, h.smem_per_block, h.arch).stages == 2
    plain = MMConfig(128, 64, 8, 2, 8, 3, True)  # 64 tiles x 2 K splits on 132 SMs
    assert plain_mm_config("q4_k", 4096, 4096, 100, h.sm_count, h.smem_per_block, h.arch) == plain
    # 0.97 of a wave: the dispatch runs the same tile on a stream-K schedule, one program per SM
    assert mm_config("q4_k", 4096, 4096, 100, h.sm_count, h.smem_per_block, h.arch) == replace(
        plain, split=1, streamk=132
    )
    r = profile("rtx4090")  # 99 KB: the same 100-row launch drops to 2 stages, then 32 rows
    assert mm_config("q4_k", 4096, 4096, 100, r.sm_count, r.smem_per_block, r.arch) == MMConfig(
        128, 32, 8, 1, 8, 2, True
    )  # split from the fitted tile: 128 programs, one whole wave: no stream-K


@pytest.mark.parametrize("name", CONSUMER)
def test_attention_tiles_fit_the_gpu(name: str) -> None:
    p = profile(name)
    for group, d_pad in ((1, 128), (4, 128), (6, 128), (3, 64), (8, 256)):
        for q_len in (1, 4, 16, 24, 512):
            for elt in (2, 4):
                plan = plan_launch(4, 8, group, d_pad, q_len, 4096, target_programs(p), None,
                                   p.smem_per_block, elt)  # fmt: skip
                assert attn_smem(plan.block_m, plan.block_n, d_pad, elt, 2) <= p.smem_per_block
                assert plan.block_m >= group and plan.block_n >= 16


def test_attention_plan_unchanged_where_it_fits() -> None:
    h = profile("h200")
    for q_len in (1, 16, 512):
        assert plan_launch(1, 8, 4, 128, q_len, 4096, 264) == plan_launch(
            1, 8, 4, 128, q_len, 4096, 264, None, h.smem_per_block, 2
        )
    fp32 = plan_launch(1, 2, 6, 128, 16, 4096, 56, None, 99 * 1024, 4)  # 164 KB on sm_86
    assert (fp32.block_m, fp32.block_n) == (64, 16)


def test_split_counts_follow_the_sm_count() -> None:
    """Programs along K / KV partitions come from the SM count, not from the H200's 132."""
    small, big = profile("rtx4060"), profile("rtx4090")
    assert dp4a_config("q4_k", 128, 4096, small.sm_count).split == 1  # 64 programs >= 24 SMs
    assert dp4a_config("q4_k", 128, 4096, big.sm_count).split > 1  # 64 programs < 128 SMs
    assert pick_config("q6_k", 128, 4096, 1, small).split == 1
    assert pick_config("q6_k", 128, 4096, 1, big).split > 1
    plans = [plan_launch(1, 8, 4, 128, 1, 8192, target_programs(p)) for p in (small, big)]
    assert plans[0].parts < plans[1].parts


def _compile_check_available() -> str | None:
    try:
        import triton
        from triton.backends.nvidia.compiler import CUDABackend  # noqa: F401
    except Exception as e:  # pragma: no cover
        return f"Triton's NVIDIA backend is not importable: {e}"
    ptxas = Path(triton.knobs.nvidia.ptxas.path)
    if not (ptxas.parent / "cuobjdump").exists():  # pragma: no cover
        return f"Triton ships no cuobjdump next to {ptxas}"
    return None


def _check_configs(*args: str) -> subprocess.CompletedProcess[str]:
    """`scripts/check_consumer_configs.py ARGS` compiling for real (no interpreter)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "check_consumer_configs.py"), *args],
        capture_output=True, text=True, env=env, timeout=1800,
    )  # fmt: skip


def test_dispatched_configs_compile_for_sm86_and_sm89(tmp_path: Path) -> None:
    """The representative subset (every constexpr value, argument type, warps and stages of
    every kernel, largest tiles first) compiled for RTX 3060 (sm_86) and RTX 4090 (sm_89)."""
    reason = _compile_check_available()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "configs.json"
    proc = _check_configs("--ci", "--profiles", "rtx3060,rtx4090", "--jobs",
                          str(min(os.cpu_count() or 1, 4)), "--json", str(out))  # fmt: skip
    assert out.exists(), proc.stdout + proc.stderr
    rows = json.loads(out.read_text())
    assert {r["arch"] for r in rows} == {86, 89}
    kernels = {r["launch"].split()[0] for r in rows}
    assert {"_qmm_kernel", "_attn_kernel", "_dp4a_kernel", "_qlinear_kernel"} <= kernels
    assert "_copy_slots_kernel" in kernels
    bad = [f"{r['profile']}: {r['launch']}: {r['violations']}" for r in rows if r["violations"]]
    assert not bad, "\n".join(bad)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r in rows:
        assert r["shared"] <= PROFILES[r["profile"]].smem_per_block
        assert r["registers"] <= 255 and r["registers"] * r["threads"] <= 65536


def test_long_context_attention_compiles_for_sm86_and_sm89(tmp_path: Path) -> None:
    """The long-context MHA attention loop over int8 KV (`KDOT`, the one batch-1 llama2 decode
    with int8 activations takes past plan.LONG_CONTEXT), picked out by `--where`, fits an RTX
    3060 and 4090; `--where` keeps only launches with those constexpr values."""
    reason = _compile_check_available()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "kdot.json"
    proc = _check_configs("--models", "llama2-7b", "--kernels", "_attn_kernel", "--where",
                          "KDOT=1,OUT_QUANT=1,BLOCK_SIZE=16", "--jobs", "2", "--json", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())
    assert {r["arch"] for r in rows} == {86, 89}
    for r in rows:
        assert " KDOT=1 " in r["launch"] and " OUT_QUANT=1 " in r["launch"], r["launch"]
        assert not r["violations"], r
        assert r["shared"] <= PROFILES[r["profile"]].smem_per_block
    bad = _check_configs("--where", "KDOT")
    assert bad.returncode == 2 and "--where takes NAME=VALUE" in bad.stderr
