"""The dp4a GEMV's K loop keeps its tiles in registers under every Triton we support.

Triton lays a load out from its pointers' contiguity. The weight tiles' pointers are as
(non-)contiguous along groups as along rows, and 3.7 reversed how 3.6 broke that tie, so the
tiles are built in the order that gives each Triton the layout of the accumulators
(`quant/dp4a_ops_triton.py`, ROWS_FIRST). `scripts/check_dp4a_layout.py` compiles the kernels
for sm_90 and sm_89 (no GPU needed) and counts shared-memory instructions in their SASS loops:
a layout conversion on every K step. Its --flip mode builds the tiles the other way round and
must find the conversions back, so the check can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
from localllm.kernels.checks.compile import sass_loops  # noqa: E402
from localllm.kernels.linear import dp4a_triton as dp  # noqa: E402
from localllm.kernels.quant import dp4a_ops_triton as dq  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_rows_first_follows_the_triton_version() -> None:
    assert not dq._rows_first("3.6.0") and not dq._rows_first("3.5.1")
    assert dq._rows_first("3.7.1") and dq._rows_first("3.9.0") and dq._rows_first("4.0.0")
    assert dq._rows_first("3.10.0+git1234")


def test_warps_never_outnumber_the_groups() -> None:
    assert dp.fitting_warps(2, 32) == 1  # K <= 1024: one warp's lanes cover the step
    assert dp.fitting_warps(2, 64) == 2 and dp.fitting_warps(4, 64) == 2
    assert dp.fitting_warps(1, 16) == 1 and dp.fitting_warps(4, 256) == 4


def test_sass_loops_reads_backward_branches() -> None:
    listing = "\n".join([
        "        /*0000*/                   MOV R1, c[0x0][0x28] ;",
        "        /*0010*/                   LDG.E R2, desc[UR4][R2.64] ;",
        "        /*0020*/                   LDS.128 R4, [R3] ;",
        "        /*0030*/                   IDP.4A.U8.S8 R5, R6, R7, R5 ;",
        "        /*0040*/               @P0 BRA 0x10 ;",
        "        /*0050*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;",
        "        /*0060*/                   EXIT ;",
    ])  # fmt: skip
    assert sass_loops(listing) == [(4, 1)]  # 0x10..0x40; the barrier after the loop is out


def _compiler_missing() -> str | None:
    try:
        import triton
        from triton.backends.nvidia.compiler import CUDABackend  # noqa: F401
    except Exception as e:  # pragma: no cover
        return f"Triton's NVIDIA backend is not importable: {e}"
    ptxas = triton.knobs.nvidia.ptxas.path
    if not os.path.exists(os.path.join(os.path.dirname(ptxas), "cuobjdump")):  # pragma: no cover
        return f"Triton ships no cuobjdump next to {ptxas}"
    return None


def _check(tmp_path: Path, *flags: str) -> list[dict]:
    reason = _compiler_missing()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "layout.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")  # the flipped kernels are not cached ones
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "check_dp4a_layout.py"), "--json", str(out),
         *flags], capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert out.exists(), proc.stdout + proc.stderr
    return json.loads(out.read_text())


def test_dp4a_loops_keep_tiles_in_registers(tmp_path: Path) -> None:
    rows = _check(tmp_path)
    assert {r["arch"] for r in rows} == {90, 89} and len(rows) >= 16
    bad = [r for r in rows if r["loop_shared"]]
    assert not bad, "\n".join(f"sm_{r['arch']} {r['fmt']} {r['n']}x{r['k']} T={r['rows']} "
                              f"{r['cfg']}: loops {r['loops']}" for r in bad)  # fmt: skip
    assert all(r["loops"] for r in rows)  # every case has its K loop
    # the register cap of the tall Q4_K verify rows reaches the compiled program
    capped = [r for r in rows if r["cfg"]["regs"]]
    assert capped and all(r["registers"] <= r["cfg"]["regs"] for r in capped)


def test_verify_rows_take_the_table_tiles() -> None:
    """`_VERIFY_TILES` at 5+ activation rows: a Q4_K matrix taller than 4096 rows takes 4 weight
    rows per program under VERIFY_REGS registers, a Q6_K matrix of up to 1024 rows 2 under the
    cap; 4096-row matrices, other formats and fewer rows stay uncapped."""
    tall = dp.dp4a_config("q4_k", 28672, 4096, 132, 5)
    assert (tall.bn, tall.regs) == (4, dp.VERIFY_REGS)
    assert dp.dp4a_config("q4_k", 5120, 4096, 132, 9).regs == dp.VERIFY_REGS
    assert dp.dp4a_config("q4_k", 4096, 4096, 132, 5).regs == 0
    assert dp.dp4a_config("q4_k", 28672, 4096, 132, 3).regs == 0
    assert dp.dp4a_config("q4_k", 28672, 4096, 132, 1).regs == 0
    assert dp.dp4a_config("q6_k", 128256, 4096, 132, 5).regs == 0
    small = dp.dp4a_config("q6_k", 1024, 4096, 132, 5)
    assert (small.bn, small.regs, small.split) == (2, dp.VERIFY_REGS, 1)
    assert dp.dp4a_config("q4_0", 1024, 4096, 132, 5).regs == 0


def test_the_other_tile_order_converts_every_step(tmp_path: Path) -> None:
    rows = _check(tmp_path, "--flip", "--archs", "90")
    one_row = [r for r in rows if r["rows"] == 1 and r["k"] >= 4096]
    assert one_row and all(r["loop_shared"] > 0 for r in one_row)
