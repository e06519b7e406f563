"""The fused GEMM's sm_90 SASS without a GPU: for the dispatch's config at each row count and
shape, with `MMConfig.ahead` off and on, the registers and stack a thread takes and the
instructions between the K loop's last `HGMMA` and its `WARPGROUP.DEPBAR` (the wait for the
MMA: work there runs beside it). The launch is captured from the engine's own launcher and
built as Triton's JIT builds it, argument specializations included (`kernels/checks`: capture,
compile), then disassembled by Triton's bundled `cuobjdump`. BENCHMARKS.md sessions 38-39.

Usage: python3 scripts/sass_qmm.py [--fmts q4_0,q4_k] [--cases 100x28672x4096,64x28672x4096]
Run it under another Triton (e.g. `PYTHONPATH=/tmp/t36:.` with a wheel unpacked there) to read
that version's ptxas.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import replace

import torch
import triton

from localllm.kernels.checks import compile as cc
from localllm.kernels.checks import space
from localllm.kernels.checks.capture import capture
from localllm.kernels.linear import qmm_triton as mm
from localllm.kernels.plan import LinearKernel

H200 = (132, 232448, 90)  # SMs, shared memory per block, arch: the configs the dispatch picks


def sass(fmt: str, cfg: mm.MMConfig, k: int, n: int, t: int) -> tuple[str, int, int]:
    """(the SASS, registers per thread, stack + local bytes) of `_qmm_kernel` at `cfg` for t
    fp16 rows of an n x k weight, as a launch builds it for sm_90."""
    with capture() as launches:
        space._linear(LinearKernel.FUSED_GEMM, cfg, fmt, n, k, t, torch.float16, False)
    kernel, _ = cc.build(launches[0], H200[2])
    cubin = kernel.asm["cubin"]
    regs, _, local = cc._cubin_usage(cubin)
    return cc.sass(cubin), regs, local


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
                code, regs, stack = sass(fmt, cfg, k, n, t)
                ops = mma_shadow(code)
                top = sorted(ops.items(), key=lambda kv: -kv[1])[:5]
                print(f"{fmt} {n}x{k} T={t} ahead={int(ahead)}: REG {regs} "
                      f"STACK {stack} B; {sum(ops.values())} instructions "
                      f"between the last HGMMA and the wait {top}; {cfg}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
