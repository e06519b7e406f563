"""The session-35 prototypes of an RMSNorm fused into the GEMV before it (outside the engine,
`scripts/proto_norm_producer.py`, `scripts/proto_col_scales.py`) still build on the engine's
dp4a pieces and match their torch references (interpreter on the CPU, small shapes), so their
recorded timings can be reproduced."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import proto_col_scales  # noqa: E402
import proto_norm_producer  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def test_whole_group_producer_matches_torch() -> None:
    proto_norm_producer._check(DEV)  # asserts r, the int8 form, its stats and sum(r^2)


def test_column_scale_consumer_matches_torch() -> None:
    proto_col_scales._check(DEV)  # asserts the GEMV against the dequantized column form


def test_column_form_roundtrip() -> None:
    x = torch.randn(2, 64)
    q, s = proto_col_scales.quant_cols_ref(x)
    back = proto_col_scales.dequant_cols(q, s)
    assert (back - x).abs().max() <= s[:, :, :4].max() / 2 + 1e-6
    cols = x.view(2, 2, 8, 4).abs().amax(2) / 127.0  # column c: elements c, c + 4, ..
    torch.testing.assert_close(s[:, :, :4], cols)
