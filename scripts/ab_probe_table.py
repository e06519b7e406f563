"""Tabulate `scripts/probe_qmm.py` records (its $OUT/probe_qmm_configs.jsonl) of several runs
side by side: per shape and row count, each run's time of the plain grid and of the stream-K
form (`MMConfig.streamk` > 0), in us. A run's file name is its column head.

Usage: python3 scripts/ab_probe_table.py probe_old1.jsonl probe_new1.jsonl ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(path: str) -> dict[tuple, dict[str, float]]:
    """(fmt, n, k, t) -> {"plain": us, "streamk": us}, the fastest record of each kind."""
    out: dict[tuple, dict[str, float]] = {}
    for line in open(path):
        if not line.strip():
            continue
        r = json.loads(line)
        kind = "streamk" if r["cfg"].get("streamk") else "plain"
        per = out.setdefault((r["fmt"], r["n"], r["k"], r["t"]), {})
        per[kind] = min(per.get(kind, float("inf")), r["us"])
    return out


def table(paths: list[str]) -> str:
    runs = [(Path(p).stem, load(p)) for p in paths]
    keys = sorted({key for _, run in runs for key in run}, key=lambda s: (s[0], s[1], s[2], s[3]))
    head = "| shape | rows | " + " | ".join(f"{name} plain | {name} stream-K" for name, _ in runs)
    lines = [head + " |", "| --- " * (2 + 2 * len(runs)) + "|"]
    for key in keys:
        cells = []
        for _, run in runs:
            per = run.get(key, {})
            cells += [f"{per[k]:.1f}" if k in per else "-" for k in ("plain", "streamk")]
        lines.append(
            f"| {key[0].upper()} {key[1]}x{key[2]} | {key[3]} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(sys.argv[1:]))
