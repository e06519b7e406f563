"""The fused GEMM's sm_90 SASS without a GPU: for the dispatch's config at each row count and
shape, with `MMConfig.ahead` off and on, the registers and stack a thread takes and the
instructions between the K loop's last `HGMMA` and its `WARPGROUP.DEPBAR` (the wait for the
MMA: work there runs beside it). Compiled by Triton for sm_90 and disassembled by its bundled
`cuobjdump`. BENCHMARKS.md session 38.

Usage: python3 scripts/sass_qmm.py [--fmts q4_0,q4_k] [--cases 100x28672x4096,64x28672x4096]
Run it under another Triton (e.g. `PYTHONPATH=/tmp/t36:.` with a wheel unpacked there) to read
that version's ptxas.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import replace

import torch
import triton
from triton.compiler import ASTSource

sys.path.insert(0, os.path.dirname(__file__))
import ptx_snapshot as ps  # noqa: E402

from localllm.kernels.linear import qmm_triton as mm  # noqa: E402

BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
H200 = (132, 232448, 90)  # SMs, shared memory per block, arch: the configs the dispatch picks


def sass(fmt: str, cfg: mm.MMConfig, k: int, n: int, t: int) -> tuple[str, str]:
    """(the SASS, the resource usage) of `_qmm_kernel` at `cfg` for t rows of an n x k weight,
    fp16 x."""
    case = ps.qmm_case("qmm", fmt, cfg, k, torch.float16)
    # as the JIT specializes a launch: pointers 16-byte aligned, and the integers that are
    # multiples of 16 marked so (without the strides' marks the x tile loads 2 bytes at a time)
    _, per_split, _ = mm.split_groups(fmt, cfg.ng, cfg.split, k // 32)
    ints = {"T": t, "N": n, "G": k // 32, "stride_xm": k, "stride_om": n,
            "groups_per_split": per_split}  # fmt: skip
    aligned = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(case.kernel.arg_names)
               if case.types.get(a, "")[:1] == "*" or ints.get(a, 1) % 16 == 0}  # fmt: skip
    src = ASTSource(fn=case.kernel, signature=case.signature(), constexprs=dict(case.consts),
                    attrs=aligned)  # fmt: skip
    kernel = triton.compile(src, target=ps.TARGET,
                            options={"num_warps": cfg.warps, "num_stages": cfg.stages})  # fmt: skip
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        run = [os.path.join(BIN, "cuobjdump")]
        code = subprocess.run([*run, "-sass", f.name], capture_output=True, text=True).stdout
        usage = subprocess.run([*run, "-res-usage", f.name], capture_output=True, text=True).stdout
    return code, usage


def mma_shadow(code: str) -> dict[str, int]:
    """Opcode counts between the last HGMMA and the first WARPGROUP.DEPBAR."""
    lines = code.splitlines()
    mma = [i for i, line in enumerate(lines) if "HGMMA" in line]
    wait = [i for i, line in enumerate(lines) if "WARPGROUP.DEPBAR" in line]
    ops: dict[str, int] = {}
    for line in lines[mma[-1] + 1 : wait[0]] if mma and wait else []:
        m = re.search(r"\*/\s+(@!?P\d+\s+)?([A-Z0-9_]+)", line)
        if m:
            ops[m.group(2)] = ops.get(m.group(2), 0) + 1
    return ops


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fmts", default="q4_0,q4_k")
    ap.add_argument("--cases", default="100x28672x4096,100x4096x14336,64x28672x4096",
                    help="rows x N x K, comma list")  # fmt: skip
    a = ap.parse_args()
    print(f"Triton {triton.__version__}")
    for fmt in a.fmts.split(","):
        for case in a.cases.split(","):
            t, n, k = map(int, case.split("x"))
            base = mm.mm_config(fmt, n, k, t, *H200)
            for ahead in (False, True):
                cfg = replace(base, ahead=ahead)
                code, usage = sass(fmt, cfg, k, n, t)
                regs, stack = re.search(r"REG:(\d+)", usage), re.search(r"STACK:(\d+)", usage)
                ops = mma_shadow(code)
                top = sorted(ops.items(), key=lambda kv: -kv[1])[:5]
                print(f"{fmt} {n}x{k} T={t} ahead={int(ahead)}: REG {regs and regs.group(1)} "
                      f"STACK {stack and stack.group(1)} B; {sum(ops.values())} instructions "
                      f"between the last HGMMA and the wait {top}; {cfg}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
