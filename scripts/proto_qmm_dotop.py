"""Prototype (outside the engine): the fused Q4_0 dequant-GEMM with the weights decoded straight
into the wgmma A-operand layout, against the engine's `_qmm_kernel` (BENCHMARKS.md, session 21).

The engine's swapped GEMM decodes each thread's whole 32-element groups, then Triton converts the
tile to the A operand through shared memory every K step, and ptxas serializes its wgmmas. Here
the words are loaded as a [NG, 2, 4, 8, 2, 4] tile (groups; row bit 3; row bits 4-5; row bits
0-2; field parity; 4 words). Under Triton 3.7+ with aligned pointers, the load's layout puts
the row bits 0-2 on lanes 2-4, the field parity on lane 1, word bit 1 on lane 0 and word bit 0
in registers, so after the decode and its joins the [64, NG * 32] tile already is the A
operand (sm_90 build: no shared memory for it, one wgmma wait per K step instead of 16). The
decode here is plain Triton in fp32 (~5 instructions a weight, the engine's asm ~2). Lanes c and
c + 2 load the same words and take opposite field parities. The scales (forward group order
here) are converted through shared memory.

    python3 scripts/proto_qmm_dotop.py [--ts 32,64] [--shapes 22016x4096,...]

Checks each output against x @ W^T of the dequantized weight, then times it (weights read from
memory, CUDA graph) next to `_qmm_kernel` at the dispatch's config. Triton 3.6 breaks ties
between equally contiguous dimensions the other way (session 20), so there the tile is built
with its dimensions reversed and permuted back after the load (REV); that build does not get
the layout yet (its loads are not vectorized). `--bits` builds the fp16 weights from their bits
in plain Triton (0x6400 | f, then (x - 1032) * scale). Two packed-fp16 inline-asm decodes (one
asm per word pair with pack = 2, one per word) were compiled for sm_90 and removed: Triton 3.9
laid their tiles out otherwise, and the shared-memory conversions came back (BENCHMARKS.md,
session 21)."""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench_cudagraph

sys.path.insert(0, os.path.dirname(__file__))
from probe_qmm import cold_copies, time_us  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear import qmm_triton as mm  # noqa: E402
from localllm.kernels.quant.dp4a_ops_triton import ROWS_FIRST  # noqa: E402


@triton.jit
def _h(f):
    """fp16 1024 + f of 4-bit ints f (int32): the bits 0x6400 | f."""
    return (f | 0x6400).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def _dotop_kernel(W, S, X, OUT, T, N, G, stride_xm, stride_om, BM: tl.constexpr,
                  NG: tl.constexpr, STAGES: tl.constexpr, REV: tl.constexpr,
                  BITS: tl.constexpr = False):  # fmt: skip
    """out [T, N] = x [T, K] @ W^T: program (n, m) owns weight rows [64 n, 64 n + 64) and x rows
    [BM m, BM m + BM). W: int32 [N, 4 G] (field s of word w = element 4 s + w of a group),
    S: fp16 [N, G] (forward group order), weight = (field - 8) * scale."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    if REV:  # Triton 3.6 takes tied dimensions first to last: build them reversed
        g = tl.reshape(tl.arange(0, NG), [1, 1, 1, 1, 1, NG])
        rm = tl.reshape(tl.arange(0, 2), [1, 1, 1, 1, 2, 1])
        rh = tl.reshape(tl.arange(0, 4), [1, 1, 1, 4, 1, 1])
        rl = tl.reshape(tl.arange(0, 8), [1, 1, 8, 1, 1, 1])
        q = tl.reshape(tl.arange(0, 2), [1, 2, 1, 1, 1, 1])
        i4 = tl.reshape(tl.arange(0, 4), [4, 1, 1, 1, 1, 1])
    else:
        g = tl.reshape(tl.arange(0, NG), [NG, 1, 1, 1, 1, 1])
        rm = tl.reshape(tl.arange(0, 2), [1, 2, 1, 1, 1, 1])
        rh = tl.reshape(tl.arange(0, 4), [1, 1, 4, 1, 1, 1])
        rl = tl.reshape(tl.arange(0, 8), [1, 1, 1, 8, 1, 1])
        q = tl.reshape(tl.arange(0, 2), [1, 1, 1, 1, 2, 1])
        i4 = tl.reshape(tl.arange(0, 4), [1, 1, 1, 1, 1, 4])
    row = (pid_n * 64 + 16 * rh + 8 * rm + rl) % N  # clamped
    wp = W + row.to(tl.int64) * (G * 4) + g * 4 + 2 * (i4 // 2) + i4 % 2 + q * 0
    sp = S + row.to(tl.int64) * G + g + q * 0 + i4 * 0
    q = tl.reshape(tl.arange(0, 2), [1, 1, 1, 1, 2, 1])
    offs_m = pid_m * BM + tl.arange(0, BM)
    xp = X + offs_m.to(tl.int64)[:, None] * stride_xm + tl.arange(0, NG * 32)[None, :]
    acc = tl.zeros([64, BM], dtype=tl.float32)
    for _ in tl.range(0, G // NG, num_stages=STAGES):
        wd = tl.load(wp)
        d = tl.load(sp).to(tl.float32)
        if REV:
            wd = tl.permute(wd, (5, 4, 3, 2, 1, 0))
            d = tl.permute(d, (5, 4, 3, 2, 1, 0))
        wd = tl.reshape(wd, [NG, 2, 4, 8, 2, 2, 2])  # [.., q, w1, w0]
        d = tl.reshape(d, [NG, 2, 4, 8, 2, 2, 2])
        v = wd >> (4 * q[:, :, :, :, :, :, None])  # fields q, q + 2, q + 4, q + 6 at bits 0, 8, ..
        if BITS:  # fp16 from the bits: 0x6400 | f is 1024 + f, then (x - 1032) * scale
            d16 = d.to(tl.float16)
            u0 = (_h(v & 15) - 1032.0) * d16
            u2 = (_h((v >> 8) & 15) - 1032.0) * d16
            u4 = (_h((v >> 16) & 15) - 1032.0) * d16
            u6 = (_h((v >> 24) & 15) - 1032.0) * d16
        else:
            u0 = (((v & 15).to(tl.float32) - 8.0) * d).to(tl.float16)  # field q
            u2 = ((((v >> 8) & 15).to(tl.float32) - 8.0) * d).to(tl.float16)  # field q + 2
            u4 = ((((v >> 16) & 15).to(tl.float32) - 8.0) * d).to(tl.float16)  # q + 4
            u6 = ((((v >> 24) & 15).to(tl.float32) - 8.0) * d).to(tl.float16)  # q + 6
        t = tl.join(tl.join(u0, u2), tl.join(u4, u6))  # [G, Rm, Rh, Rl, q, w1, w0, j0, j1]
        # element 4 s + w with s = q + 2 j0 + 4 j1: k = 16 j1 + 8 j0 + 4 q + 2 w1 + w0
        t = tl.permute(t, (2, 1, 3, 0, 8, 7, 4, 5, 6))  # [Rh, Rm, Rl, G, j1, j0, q, w1, w0]
        wt = tl.reshape(t, [64, NG * 32])
        x = tl.load(xp, mask=(offs_m < T)[:, None], other=0.0)
        acc = tl.dot(wt, tl.trans(x), acc)
        wp += NG * 4
        sp += NG
        xp += NG * 32
    acc = tl.trans(acc)  # [BM, 64]
    offs_n = pid_n * 64 + tl.arange(0, 64)
    op = OUT + offs_m.to(tl.int64)[:, None] * stride_om + offs_n[None, :]
    tl.store(op, acc.to(OUT.dtype.element_ty), mask=(offs_m < T)[:, None] & (offs_n < N)[None, :])


def dotop_launch(x, qs, d, n, bm, ng, stages, warps, bits=False):
    t, k = x.shape
    out = torch.empty((t, n), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(n, 64), triton.cdiv(t, bm))
    _dotop_kernel[grid](qs, d, x, out, t, n, k // 32, x.stride(0), out.stride(0), BM=bm, NG=ng,
                        STAGES=stages, REV=not bool(ROWS_FIRST), BITS=bits, num_warps=warps)  # fmt: skip
    return out


def dequant(qs: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """fp32 [N, K] of the prototype's layout (element 4 s + w of group g: field s of word w)."""
    n, words = qs.shape
    q = qs.view(n, words // 4, 4)  # [N, G, w]
    fields = torch.stack([(q >> (4 * s)) & 15 for s in range(8)], dim=2)  # [N, G, s, w]
    return ((fields.float() - 8) * d.float()[:, :, None, None]).reshape(n, -1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ts", default="32,64")
    ap.add_argument("--shapes", default="22016x4096,12288x4096,4096x4096,4096x11008")
    ap.add_argument("--bits", action="store_true", help="fp16 from the bits in plain Triton")
    ap.add_argument("--configs", default="8:3:4,8:3:8,8:4:4,4:4:4,8:2:4",
                    help="groups per step : stages : warps, comma-separated")  # fmt: skip
    a = ap.parse_args()
    props = device_props(torch.device("cuda"))
    path = os.path.join(os.environ.get("OUT", "."), "proto_qmm_dotop.jsonl")
    for shape in a.shapes.split(","):
        n, k = map(int, shape.split("x"))
        w, copies = cold_copies("q4_0", n, k)
        qs0, d0 = copies[0]
        ref_w = dequant(qs0, d0)
        for t in map(int, a.ts.split(",")):
            x = torch.randn(t, k, device="cuda").half()
            ref = x.float() @ ref_w.t()
            cfg = mm.mm_config("q4_0", n, k, t, props.sm_count, props.smem_per_block, props.arch)

            base = time_us(mm, x, copies, "q4_0", n, cfg, exact=True)
            line = f"q4_0 {n}x{k} T={t}: engine {base:.1f} us |"
            cfgs = [tuple(map(int, c.split(":"))) for c in a.configs.split(",")]
            for bm in [min(64, max(16, t))]:
                for ng, stages, warps in cfgs:
                    try:
                        o = dotop_launch(x, qs0, d0, n, bm, ng, stages, warps, a.bits).float()
                        err = ((o - ref).abs().max() / ref.abs().max()).item()

                        def run(bm=bm, ng=ng, stages=stages, warps=warps, x=x, copies=copies, n=n):
                            for qs, d in copies:
                                dotop_launch(x, qs, d, n, bm, ng, stages, warps, a.bits)

                        us = do_bench_cudagraph(run, rep=30) * 1e3 / len(copies)
                    except Exception as e:  # noqa: BLE001 - a config that does not fit
                        print(f"   bm{bm} ng{ng} s{stages} w{warps}: {type(e).__name__}",
                              flush=True)  # fmt: skip
                        continue
                    line += f" bm{bm} ng{ng} s{stages} w{warps} {us:.1f} (err {err:.0e})"
                    with open(path, "a") as f:
                        f.write(json.dumps({"n": n, "k": k, "t": t, "engine_us": base, "us": us,
                                            "err": err, "bm": bm, "ng": ng, "stages": stages,
                                            "warps": warps}) + "\n")  # fmt: skip
            print(line, flush=True)


if __name__ == "__main__":
    main()
