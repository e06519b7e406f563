"""Prototype (issue 16): does overlapping the weight decode with an asynchronous wgmma speed up
a dequantizing GEMM at 65-128 activation rows (the cached turn's prefill graph, batched decode
of many streams)?

Why: the engine's fused GEMM (`kernels/linear/qmm_triton.py`) waits for its wgmma at every K
step. Compiled for sm_90 (Triton 3.9, the 32-, 64- and 100-row configs of llama3-8b's shapes,
weights as either operand) its K loop holds one `wgmma.wait_group.sync.aligned 0` after the
MMAs, so a warpgroup's decode of the next weight tile never runs beside its own MMA: only
other warps on the SM hide it. Triton's automatic warp specialization is Blackwell-only (Triton
3.9's `tl.range` docs). Gluon (`triton.experimental.gluon`, in the device's Triton 3.6 and in
3.9) issues `warpgroup_mma(is_async=True)` and places `warpgroup_mma_wait` itself.

The kernel: out [T, N] = x [T, K] @ W^T with W = (q - 8) * s, q one 4-bit value per int8 byte
(a prototype layout: twice Q4_0's weight bytes, loaded straight into the wgmma A-operand
register layout, no layout conversion), s one fp16 scale per 32 weights of a row. A program
owns BN weight rows (the MMA's M: weights as the A operand, as the engine's `swap`) and BM x
rows (the MMA's N), walks K in BK steps; x tiles stream into a STAGES-deep shared-memory ring by
cp.async; the weight bytes and scales are loaded two steps ahead into registers. ASYNC = 1:
issue step i's wgmma, decode step i + 1's weights, then wait (decode beside the MMA); ASYNC = 0:
issue, wait, then decode (the engine's order). Both compute the same result; the difference
between their times is what the overlap is worth at this tile.

Usage (an sm_90 GPU): python3 scripts/proto_gluon_wgmma.py [--ts 64,100,128]
       [--shapes 28672x4096,4096x14336,6144x4096] [--bk 64] [--stages 3]
       python3 scripts/proto_gluon_wgmma.py --compile-only   # PTX for sm_90, no GPU needed
Prints us per call of ASYNC 0 / 1 (weights read from memory: copies cycled past the L2), the
max error against a torch reference, and the engine's fused GEMM on Q4_0 weights of the same
shape (`qmm_launch` at the dispatch's config) for scale.
"""

# ruff: noqa: E402, N803, N806  (constexpr names as the Triton kernels spell them)
from __future__ import annotations

import argparse
import functools
import os
import re
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    warpgroup_mma,
    warpgroup_mma_wait,
)

# a CTA-wide barrier and cp.async into shared memory, as Triton 3.9 / 3.6 spell them
_barrier = getattr(gl, "barrier", None) or gl.thread_barrier
_cp_async = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared


@gluon.jit
def _load_w(w_ptr, s_ptr, rows, cols, K, k0):
    """Weight bytes [BN, BK] (int8) and their scales (fp16) of the K step at k0, in the
    A-operand layout of `rows` / `cols`."""
    q = gl.load(w_ptr + rows[:, None] * K + (k0 + cols)[None, :])
    s = gl.load(s_ptr + rows[:, None] * (K // 32) + ((k0 + cols) // 32)[None, :])
    return q, s


@gluon.jit
def _decode(q, s):
    return (q.to(gl.float16) - 8.0) * s  # [BN, BK] fp16, A-operand layout


@gluon.jit
def _wgmma_qmm_kernel(x_ptr, w_ptr, s_ptr, out_ptr, T, N, K: gl.constexpr,
                      BN: gl.constexpr, BM: gl.constexpr, BK: gl.constexpr,
                      STAGES: gl.constexpr, ASYNC: gl.constexpr, num_warps: gl.constexpr):  # fmt: skip
    acc_l: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BM, 16]
    )
    a_l: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_l, k_width=2)
    x_bl: gl.constexpr = gl.BlockedLayout(
        [1, 8], [32 // (BK // 8), BK // 8], [num_warps, 1], [1, 0]
    )
    x_sl: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)

    pid_n = gl.program_id(0)
    pid_m = gl.program_id(1)
    n_steps = K // BK
    # weight rows (clamped: loads need no mask) and K columns in the A-operand layout
    rows = gl.minimum(pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(1, a_l)), N - 1)
    cols = gl.arange(0, BK, layout=gl.SliceLayout(0, a_l))
    # x rows (clamped to the last one: the extra output columns are not stored)
    xr = gl.minimum(pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, x_bl)), T - 1)
    xc = gl.arange(0, BK, layout=gl.SliceLayout(0, x_bl))
    x_ptrs = x_ptr + xr.to(gl.int64)[:, None] * K + xc[None, :]  # [BM, BK]

    x_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], x_sl)
    for st in gl.static_range(STAGES - 1):  # x tiles of the first STAGES - 1 steps
        _cp_async(x_smem.index(st), x_ptrs + st * BK)
        async_copy.commit_group()

    q0, s0 = _load_w(w_ptr, s_ptr, rows, cols, K, 0)
    q1, s1 = _load_w(w_ptr, s_ptr, rows, cols, K, gl.minimum(1, n_steps - 1) * BK)
    a_cur = _decode(q0, s0)
    acc = gl.zeros([BN, BM], gl.float32, layout=acc_l)
    for i in range(n_steps):
        async_copy.wait_group(STAGES - 2)  # this thread's copies of step i have landed
        _barrier()  # ... and every thread's; every warpgroup's wgmma of step i - 1 is done
        fence_async_shared()  # cp.async wrote through the generic proxy, wgmma reads async
        nxt = gl.minimum(i + STAGES - 1, n_steps - 1)  # the stage of step i - 1 is free again
        _cp_async(x_smem.index((i + STAGES - 1) % STAGES),
                                               x_ptrs + nxt * BK)  # fmt: skip
        async_copy.commit_group()
        xs = x_smem.index(i % STAGES).permute((1, 0))  # [BK, BM]
        acc = warpgroup_mma(a_cur, xs, acc, is_async=True)
        # the weights of step i + 2 into registers, those of step i + 1 decoded
        q2, s2 = _load_w(w_ptr, s_ptr, rows, cols, K, gl.minimum(i + 2, n_steps - 1) * BK)
        if ASYNC:
            a_next = _decode(q1, s1)
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        else:
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            a_next = _decode(q1, s1)
        a_cur = a_next
        q1, s1 = q2, s2
    async_copy.wait_group(0)

    on = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(1, acc_l))
    om = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(0, acc_l))
    ptrs = out_ptr + om.to(gl.int64)[None, :] * N + on[:, None]  # out [T, N] as [BN, BM]
    gl.store(ptrs, acc.to(gl.float16), mask=(on[:, None] < N) & (om[None, :] < T))


def wgmma_qmm(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor, asynchronous: bool,
              bk: int = 64, stages: int = 3) -> torch.Tensor:  # fmt: skip
    """x [T, K] fp16, q [N, K] int8 (0..15), s [N, K / 32] fp16 -> [T, N] fp16 (T <= 128)."""
    t, k = x.shape
    n = q.shape[0]
    bm = max(64, triton.next_power_of_2(t))
    out = torch.empty((t, n), device=x.device, dtype=torch.float16)
    grid = (triton.cdiv(n, 128), triton.cdiv(t, bm))
    _wgmma_qmm_kernel[grid](x, q, s, out, t, n, k, BN=128, BM=bm, BK=bk, STAGES=stages,
                            ASYNC=int(asynchronous), num_warps=8)  # fmt: skip
    return out


def reference(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    w = (q.float() - 8.0) * s.float().repeat_interleave(32, dim=1)  # [N, K]
    return x.float() @ w.t()


def compile_only(bk: int, stages: int) -> None:
    """PTX for sm_90 of both orders at 128 x rows; the waits inside the K loop."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    sig = {"x_ptr": "*fp16", "w_ptr": "*i8", "s_ptr": "*fp16", "out_ptr": "*fp16", "T": "i32",
           "N": "i32"}  # fmt: skip
    for asynchronous in (0, 1):
        consts = {"K": 4096, "BN": 128, "BM": 128, "BK": bk, "STAGES": stages, "ASYNC": asynchronous,
                  "num_warps": 8}  # fmt: skip
        full = {**sig, **{c: "constexpr" for c in consts}}
        aligned = {
            (_wgmma_qmm_kernel.arg_names.index(a),): [["tt.divisibility", 16]]
            for a in ("x_ptr", "w_ptr", "s_ptr", "out_ptr")
        }  # as the JIT specializes them
        src = GluonASTSource(fn=_wgmma_qmm_kernel, signature=full, constexprs=consts,
                             attrs=aligned)  # fmt: skip
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
        ptx = k.asm["ptx"]
        body = ptx[ptx.find("Inner Loop Header") :]
        waits = re.findall(r"wgmma.wait_group.sync.aligned\s+(\d+)", ptx)
        print(f"ASYNC={asynchronous}: {len(re.findall('wgmma.mma_async', ptx))} wgmma, waits "
              f"{waits}, "
              f"cp.async {ptx.count('cp.async.cg') + ptx.count('cp.async.ca')}, loop body "
              f"{len(body.splitlines())} lines")  # fmt: skip


def _run_proto(x, copies, asynchronous, bk, stages) -> None:  # noqa: ANN001
    for q, s in copies:
        wgmma_qmm(x, q, s, bool(asynchronous), bk, stages)


def _run_engine(mm, x, copies, n, cfg) -> None:  # noqa: ANN001
    for planes in copies:
        mm.qmm_launch(x, planes, "q4_0", n, None, cfg)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ts", default="64,100,128")
    ap.add_argument("--shapes", default="28672x4096,4096x14336,6144x4096,4096x4096")
    ap.add_argument("--bk", type=int, default=64)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--compile-only", action="store_true")
    a = ap.parse_args()
    if a.compile_only:
        compile_only(a.bk, a.stages)
        return
    from triton.testing import do_bench_cudagraph

    sys.path.insert(0, os.path.dirname(__file__))
    from bench_qlinear import random_weight

    from localllm.kernels.device import device_props
    from localllm.kernels.linear import qmm_triton as mm
    from localllm.kernels.quant import kernel_facts

    props = device_props(torch.device("cuda"))
    for shape in a.shapes.split(","):
        n, k = map(int, shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randint(0, 16, (n, k), device="cuda", dtype=torch.int8, generator=g)
        s = (torch.rand(n, k // 32, device="cuda", generator=g) * 0.02 + 0.001).half()
        reps = max(1, int(256e6 // (q.nbytes + s.nbytes)))
        copies = [(q.clone(), s.clone()) for _ in range(reps)]
        w0 = random_weight("q4_0", n, k)
        planes = [w0.tensors[p] for p in kernel_facts("q4_0").planes]
        qcopies = [[p.clone() for p in planes] for _ in range(max(1, int(256e6 // w0.nbytes)))]
        for t in map(int, a.ts.split(",")):
            x = torch.randn(t, k, device="cuda").half()
            ref = reference(x, q, s)
            line = f"{n}x{k} T={t}:"
            for asynchronous in (0, 1):
                out = wgmma_qmm(x, q, s, bool(asynchronous), a.bk, a.stages).float()
                err = ((out - ref).abs().max() / ref.abs().max()).item()

                run = functools.partial(_run_proto, x, copies, asynchronous, a.bk, a.stages)
                us = do_bench_cudagraph(run, rep=30) * 1e3 / len(copies)
                line += f" ASYNC={asynchronous} {us:.1f} us (err {err:.0e}) |"
            cfg = mm.mm_config("q4_0", n, k, t, props.sm_count, props.smem_per_block, props.arch)
            engine = functools.partial(_run_engine, mm, x, qcopies, n, cfg)
            us = do_bench_cudagraph(engine, rep=30) * 1e3 / len(qcopies)
            print(f"{line} engine q4_0 {us:.1f} us {cfg}", flush=True)


if __name__ == "__main__":
    main()
