"""Programmatic dependent launch (`kernels/pdl.py`) without a GPU: the policy (who gets it),
and the decode kernels built for sm_90 as the dispatch launches them there: griddepcontrol in
every one, only the weight GEMVs (their first weight tile), the norm (its weight slice) and
attention (the step's inputs) loading anything before the wait; built for sm_86, none of it.
The GPU tests (tests/test_gpu_engine.py) check the numbers: graphs with PDL give the tokens
and logits of graphs without."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from localllm.kernels import pdl
from localllm.kernels.device import CONSUMER, INTERPRETER, profile


def test_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    assert all(not pdl.pdl_supported(profile(name)) for name in CONSUMER)  # sm_86 / sm_89
    assert pdl.pdl_supported(profile("h200")) and pdl.pdl_supported(profile("h100"))
    assert not pdl.pdl_supported(INTERPRETER)  # runs no inline PTX
    assert not pdl.pdl_enabled(torch.device("cpu"))
    with pdl.forced(True):
        assert pdl.launch_args(pdl.pdl_enabled(torch.device("meta"))) == {"launch_pdl": True}
    assert not pdl.pdl_enabled(torch.device("meta"))
    assert pdl.launch_args(False) == {}
    monkeypatch.setattr(pdl, "TRITON_HAS_PDL", False)  # a Triton before 3.3
    assert not pdl.pdl_supported(profile("h200"))
    monkeypatch.undo()
    monkeypatch.setenv("LOCALLLM_PDL", "yes")
    with pytest.raises(ValueError, match="LOCALLLM_PDL='yes': expected one of 0, 1"):
        pdl.env_enabled()
    monkeypatch.setenv("LOCALLLM_PDL", "0")
    assert not pdl.env_enabled()
    monkeypatch.delenv("LOCALLLM_PDL")
    assert pdl.env_enabled()


@pytest.fixture(scope="module")
def built() -> list[dict]:
    """One record per decode kernel built for sm_90 (PDL) and sm_86
    (`kernels/checks/pdl_check.py`, in a process without Triton's interpreter)."""
    try:
        from triton.backends.nvidia.compiler import CUDABackend  # noqa: F401
    except Exception as e:  # pragma: no cover
        pytest.skip(f"Triton's NVIDIA backend is not importable: {e}")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "localllm.kernels.checks.pdl_check"],
                          capture_output=True, text=True, env=env, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


DECODE_KERNELS = {
    "_dp4a_rope_kernel", "_attn_kernel", "_dp4a_kernel", "_rms_norm_kernel", "_silu_mul_kernel",
    "_block_argmax_kernel", "_reduce_argmax_kernel", "_qmm_kernel", "_quant_act_kernel",
    "_rope_store_kernel", "_qlinear_kernel", "_masked_block_argmax_kernel",
    "_masked_reduce_kernel",
}  # fmt: skip
GEMVS = {"_dp4a_kernel", "_dp4a_rope_kernel"}
# what else loads before its wait: constants and the step's inputs (uploaded before the step)
PREWAIT = GEMVS | {"_rms_norm_kernel", "_attn_kernel"}


def test_sm90_decode_kernels_wait_and_trigger(built: list[dict]) -> None:
    sm90 = [r for r in built if r.get("arch") == 90]
    assert DECODE_KERNELS <= {r["kernel"] for r in sm90}
    for r in sm90:
        assert r["launch_pdl"] and r["wait"] and r["trigger"], r


def test_sm90_only_constants_and_step_inputs_load_before_waiting(built: list[dict]) -> None:
    """The weight GEMVs issue their first weight loads before the wait (PTX order), the norm its
    weight slice, attention its sequence lengths and first block-table entries, the QKV GEMV
    its positions and RoPE table; every other kernel waits before its first load."""
    for r in built:
        if r.get("arch") == 90 and r["kernel"] in DECODE_KERNELS:
            assert r["load_before_wait"] == (r["kernel"] in PREWAIT), r


def test_sm86_builds_have_no_hopper_instructions(built: list[dict]) -> None:
    sm86 = [r for r in built if r.get("arch") == 86]
    assert DECODE_KERNELS <= {r["kernel"] for r in sm86}
    for r in sm86:
        assert not (r["launch_pdl"] or r["wait"] or r["trigger"]), r


def test_compile_check_enumerates_pdl_only_for_hopper(built: list[dict]) -> None:
    """`scripts/check_consumer_configs.py` compiles what the dispatch launches on a profile:
    on an RTX 4090 nothing asks for PDL, on an H200 the decode kernels do."""
    profiles = {r["profile"]: r for r in built if "profile" in r}
    assert profiles["rtx4090"]["launches"] > 0 and profiles["rtx4090"]["pdl"] == 0
    assert profiles["h200"]["pdl"] > 0


def test_readme_documents_the_knob() -> None:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "LOCALLLM_PDL" in text
