"""`scripts/ab_probe_table.py`: probe_qmm records of several runs side by side, the fastest
plain and stream-K time of each shape per run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ab_probe_table.py"


def _records(path: Path, rows: list[tuple[str, int, int, float]]) -> None:
    with open(path, "w") as f:
        for fmt, n, streamk, us in rows:
            cfg = {"bm": 128, "bn": 64, "ng": 8, "split": 1, "streamk": streamk}
            f.write(json.dumps({"fmt": fmt, "n": n, "k": 4096, "t": 100, "us": us, "cfg": cfg}))
            f.write("\n")


def test_table_puts_runs_side_by_side(tmp_path: Path) -> None:
    _records(tmp_path / "old1.jsonl", [("q4_k", 6144, 0, 40.4), ("q4_k", 6144, 132, 41.9),
                                       ("q4_k", 6144, 132, 41.5), ("q4_0", 12288, 0, 71.8)])  # fmt: skip
    _records(tmp_path / "new1.jsonl", [("q4_k", 6144, 0, 40.2), ("q4_k", 6144, 132, 37.0)])
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "old1.jsonl"), str(tmp_path / "new1.jsonl")],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert out[0] == "| shape | rows | old1 plain | old1 stream-K | new1 plain | new1 stream-K |"
    # the fastest of a kind per run; a shape a run lacks shows "-"
    assert "| Q4_0 12288x4096 | 100 | 71.8 | - | - | - |" in out
    assert "| Q4_K 6144x4096 | 100 | 40.4 | 41.5 | 40.2 | 37.0 |" in out
