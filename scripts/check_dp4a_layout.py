"""Compile the dp4a GEMV (no GPU needed) and count shared-memory instructions in its K loop:
a layout conversion on every K step (`kernels/quant/dp4a_ops_triton.py`, ROWS_FIRST).

    python3 scripts/check_dp4a_layout.py                 # sm_90 and sm_89, the installed Triton
    python3 scripts/check_dp4a_layout.py --flip          # the other tile order (a mutation check)
    python3 scripts/check_dp4a_layout.py --json OUT.json

Prints one line per case (registers, spills, loop instructions, shared-memory instructions in
loops); exit status 1 if any loop has shared-memory instructions (unless --flip)."""

# ruff: noqa: E402  (the environment is set before Triton is imported)
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for real (the kernels must be JIT functions)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton's runtime default
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import triton
import triton.language as tl

from localllm.kernels.checks import space
from localllm.kernels.checks.capture import Launch, capture
from localllm.kernels.checks.compile import compile_launch
from localllm.kernels.linear import dp4a_triton as dp
from localllm.kernels.plan import LinearKernel
from localllm.kernels.quant import dp4a_ops_triton as dq

# (format, N, K, activation rows, config): the one-row configs of each format (tall and
# short), the 5-row verify configs (the dispatch's for a 132-SM GPU: Q4_K gate+up under its
# register cap, 4096-row Q4_K without), and a small K (32 groups) with a 2-warp config
CASES = [
    ("q4_k", 28672, 4096, 1, dp.Dp4aConfig(4, 1, 1)),
    ("q4_k", 4096, 4096, 1, dp.Dp4aConfig(4, 1, 4)),
    ("q4_0", 22016, 4096, 1, dp.Dp4aConfig(8, 2, 1)),
    ("q6_k", 4096, 14336, 1, dp.Dp4aConfig(4, 1, 4)),
    ("q8_0", 4096, 4096, 1, dp.Dp4aConfig(4, 1, 4)),
    ("q5_k", 4096, 4096, 1, dp.Dp4aConfig(4, 1, 4)),
    ("q4_k", 28672, 4096, 5, dp.dp4a_config("q4_k", 28672, 4096, 132, 5)),
    ("q4_k", 4096, 4096, 5, dp.dp4a_config("q4_k", 4096, 4096, 132, 5)),
    ("q6_k", 4096, 14336, 5, dp.Dp4aConfig(4, 1, 2)),
    ("q4_0", 1024, 1024, 5, dp.Dp4aConfig(8, 1, 2)),
]


def dp4a_launch_of(fmt: str, n: int, k: int, rows: int, cfg: dp.Dp4aConfig) -> Launch:
    """The `_dp4a_kernel` launch the dispatch makes for these shapes (`checks/space.py`'s
    launcher call on meta tensors)."""
    with capture() as launches:
        space._linear(LinearKernel.DP4A_GEMV, cfg, fmt, n, k, rows, torch.float16, False)
    (launch,) = [la for la in launches if la.kernel.endswith(":_dp4a_kernel")]
    return launch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", default="90,89")
    ap.add_argument("--flip", action="store_true", help="build the tiles in the other order")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.flip:
        dq.ROWS_FIRST = tl.constexpr(not dq.ROWS_FIRST)
    print(f"Triton {triton.__version__}, ROWS_FIRST={bool(dq.ROWS_FIRST)}")
    rows = []
    for arch in [int(x) for x in a.archs.split(",")]:
        for fmt, n, k, t, cfg in CASES:
            res = compile_launch(dp4a_launch_of(fmt, n, k, t, cfg), arch)
            loops = list(res.loops)
            rows.append({"arch": arch, "fmt": fmt, "n": n, "k": k, "rows": t, "cfg": cfg.__dict__,
                         "registers": res.registers, "spill": res.spill,
                         "loop_shared": res.loop_shared, "loops": loops})  # fmt: skip
            print(f"sm_{arch} {fmt} {n}x{k} T={t} bn={cfg.bn} gpt={cfg.gpt} w={cfg.warps} "
                  f"regs={cfg.regs or '-'}: "
                  f"{res.registers} registers, spill {res.spill} B, loops (instructions, shared) "
                  f"{loops}", flush=True)  # fmt: skip
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    bad = sum(1 for r in rows if r["loop_shared"])
    print(f"{bad} of {len(rows)} with shared-memory instructions in a loop")
    return 1 if bad and not a.flip else 0


if __name__ == "__main__":
    sys.exit(main())
