"""The prefill dequantization (`kernels/linear/dequant_triton.py`) against the torch reference
of the packed planes, every packed format incl. AWQ (interpreter on CPU with small shapes: K
tails of a split, rows past a block; 8B shapes on a GPU), and its configs."""

from __future__ import annotations

import pytest
import torch
from test_kernels_awq import _awq
from test_kernels_qlinear import KERNEL_QTYPES, random_raw

from localllm.kernels.device import INTERPRETER, PROFILES, DeviceProps
from localllm.kernels.linear.qlinear import dequantize_weight, pack_weight

triton = pytest.importorskip("triton")
dq = pytest.importorskip("localllm.kernels.linear.dequant_triton")

CONFIGS = [dq.DequantConfig(16, 8, 1, 2, 1), dq.DequantConfig(32, 8, 3, 4, 2)]


def _weights(n: int, k: int, device: str) -> dict[str, object]:
    ws = {fmt: pack_weight(random_raw(qt, n, k, seed=n + k), device)
          for qt, fmt in KERNEL_QTYPES.items()}  # fmt: skip
    ws["awq128"] = pack_weight(_awq(n, k, 128)[1], device)
    return ws


@pytest.mark.parametrize("cfg", CONFIGS, ids=["one-split", "three-splits"])
def test_dequantize_matches_reference(cfg: object) -> None:
    """40 rows (a partial row block), K = 768 (3 super-blocks; splits of unequal length)."""
    for fmt, w in _weights(40, 768, "cpu").items():
        ref = dequantize_weight(w)
        out = dq.dequant_launch(w, torch.float32, cfg)
        torch.testing.assert_close(out, ref, rtol=0, atol=1e-6 * ref.abs().max().item(), msg=fmt)
        half = dq.dequant_launch(w, torch.float16, cfg)
        torch.testing.assert_close(half.float(), ref, rtol=1e-3, atol=1e-3 * ref.abs().max().item())


@pytest.mark.parametrize("props", [INTERPRETER, *PROFILES.values()], ids=lambda p: p.name)
def test_dequant_config_fills_the_gpu(props: DeviceProps) -> None:
    for fmt in ("q4_k", "q4_0", "q6_k", "q8_0"):
        for n, k in ((4096, 4096), (28672, 4096), (4096, 14336), (1024, 4096), (256, 512)):
            cfg = dq.dequant_config(fmt, n, k, props.sm_count)
            ng, per_split, split = dq.split_groups(fmt, cfg.ng, cfg.split, k // 32)
            assert split <= cfg.split and per_split % ng == 0  # whole steps per split
            programs = triton.cdiv(n, cfg.bn) * cfg.split
            # enough programs for the SMs, or every split already as short as 2-3 steps
            assert programs >= dq.WAVES * props.sm_count or per_split < 4 * ng


@pytest.mark.gpu
def test_dequantize_8b_shapes_on_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    for n, k in ((4096, 4096), (1024, 4096), (4096, 14336)):
        for fmt, w in _weights(n, k, "cuda").items():
            ref = dequantize_weight(w)
            for dtype in (torch.float16, torch.bfloat16):
                out = dq.dequantize(w, dtype).float()
                tol = (1e-3 if dtype == torch.float16 else 8e-3) * ref.abs().max().item()
                torch.testing.assert_close(out, ref, rtol=1e-3, atol=tol, msg=f"{fmt} {n}x{k}")
