"""Prototype (issue 15 / 16, not used by the engine): a few-row GEMM of 4-bit weights and int8
activations on the int8 tensor cores. Does a 5-row verify step's GEMV get cheaper?

The 5-row dp4a GEMV (`linear/dp4a_triton.py`) costs ~1.7x one row: 5 accumulator chains per
weight word and 255 registers (session 14). Here each program decodes a [BN, 32] tile of one
quant group to int8 (Q4_0 / Q4_K nibbles 0..15: `word & 0x0F0F0F0F` holds 4 of them, already
in the byte order of the "w4" activations, `fused/quant_act.py`), multiplies it with up to BT
activation rows on the tensor cores (int32 per group, exact), and scales per group:
    out[t, n] += A[n] * dx[t] * dot(q[n], xq[t]) - B[n] * dxs[t]
Q4_0: A = d, B = 8 d; Q4_K: A = d * scale, B = dmin * min; dx, dxs = dx * sum(xq): the
quantizer's per-group scale and sum. BT = 16 (the tensor cores' smallest N): 5 rows cost
what 16 do.

Measured (H100, session 16, `benchmarks/session16/proto_imma_h100.jsonl`): it lost by 3-6x.
Q4_K 4096x4096 at 5 rows 30.8 us (best of 6 configs) against the dp4a GEMV's 6.7; 28672x4096
122.7 against 36.3; Q4_0 4096x11008 65.7 against 13.1. One 32-element group per K step (its
own scales) makes a K=32 int8 dot per step. Its sm_90 SASS (Q4_K, BN = 64, 4 warps) has no
layout conversion in the loop: the weights reach the wgmma from registers. But the loop body is
245 instructions per warp per group (~0.48 per weight, the dp4a GEMV ~0.09-0.15): small loads
and their shared-memory copies, the nibble decode, the per-group scaling and addresses redone
every step, about a quarter each. Not pursued; kept to reproduce the figures.

Session 32: BT follows the rows (16, 32 or 64: up to 64 rows in one tile), and above 6 rows the
baseline is the engine's fused dequant GEMM (`_qmm_kernel`, fp16 activations) at its
dispatch's config: is W4A8 on the int8 tensor cores a lever for 32-64 streams (issue 16)?

Usage: python3 scripts/proto_imma.py [--shapes 2,3,4,8,9,10] [--rows 1,5,16,32,64] [--configs 0,1]
Checks each config against the dequantized product, then times it (weights read from memory,
CUDA graph) beside the dispatch's dp4a GEMV (up to 6 rows) or fused GEMM (more). Appends JSON
lines to $OUT/proto_imma.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))

FMT_CODES = {"q4_0": 0, "q4_k": 1}


@triton.jit
def _bytes(p):
    """int32 [BN, 2, 4] of 4 bytes each -> int8 [BN, 32] (byte j of element (t, w) at
    16 t + 4 w + j), byte by byte. (Handing Triton the words as packed int8 through
    `inline_asm_elementwise(pack=4)` of a broadcast gave wrong products on an H100: the 4
    elements of one asm instance are not the 4 broadcast copies.)"""
    j = tl.arange(0, 4)[None, None, None, :]
    q = ((p[:, :, :, None] >> (8 * j)) & 0xFF).to(tl.int8)
    return tl.reshape(q, (p.shape[0], 32))


@triton.jit
def _imma_kernel(xq, xs, qs, p1, p2, p3, out, T, N, G, S, groups_per_split,
                 FMT: tl.constexpr, BN: tl.constexpr, BT: tl.constexpr, ATOMIC: tl.constexpr):  # fmt: skip
    """out [T, N] (+)= x [T, K] W^T for program (n, s): weight rows [n BN, n BN + BN), groups
    [s groups_per_split, ...). xq int8 [T, K] ("w4" order), xs fp32 [T, G, 4]."""
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    rows = pid_n * BN + tl.arange(0, BN)  # [BN]
    rmask = rows < N
    rows = (rows % N).to(tl.int64)
    t = tl.arange(0, BT)  # [BT]
    tmask = t < T
    kk = tl.arange(0, 32)
    sh = 4 * tl.arange(0, 2)[None, :, None]  # [1, 2, 1]: low then high nibbles
    wcol = tl.arange(0, 4)[None, None, :]  # [1, 1, 4]
    acc = tl.zeros([BN, BT], dtype=tl.float32)
    g = pid_s * groups_per_split  # the host splits the groups evenly
    for _ in range(groups_per_split):
        w = tl.load(qs + rows[:, None, None] * (4 * G) + 4 * g + wcol)  # [BN, 1, 4] int32
        q = _bytes((w >> sh) & 0x0F0F0F0F)  # [BN, 32] int8, 0..15
        xt = tl.load(xq + t[None, :] * (32 * G) + 32 * g + kk[:, None], mask=tmask[None, :],
                     other=0)  # [32, BT] int8  # fmt: skip
        dot = tl.dot(q, xt, out_dtype=tl.int32)  # [BN, BT]
        dx = tl.load(xs + t * (4 * G) + 4 * g, mask=tmask, other=0.0)  # [BT]
        dxs = tl.load(xs + t * (4 * G) + 4 * g + 1, mask=tmask, other=0.0)
        if FMT == 0:  # Q4_0: d fp16 [N, G], reversed group order
            a = tl.load(p1 + rows * G + (G - 1 - g)).to(tl.float32)
            b = 8.0 * a
        else:  # Q4_K: sm uint8 [N, 2G] (scale, min), d / dmin fp16 [N, S]
            sc = tl.load(p1 + rows * (2 * G) + 2 * g).to(tl.float32)
            mn = tl.load(p1 + rows * (2 * G) + 2 * g + 1).to(tl.float32)
            a = tl.load(p2 + rows * S + g // 8).to(tl.float32) * sc
            b = tl.load(p3 + rows * S + g // 8).to(tl.float32) * mn
        acc += a[:, None] * (dot.to(tl.float32) * dx[None, :]) - b[:, None] * dxs[None, :]
        g += 1
    optr = out + t[None, :].to(tl.int64) * N + rows[:, None]
    omask = rmask[:, None] & tmask[None, :]
    if ATOMIC:
        tl.atomic_add(optr, acc, mask=omask, sem="relaxed")
    else:
        tl.store(optr, acc.to(out.dtype.element_ty), mask=omask)


def imma(xq: torch.Tensor, xs: torch.Tensor, planes: list[torch.Tensor], fmt: str, n: int,
         bn: int, warps: int, split: int, stages: int, out: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """out [T, N]: fp16, or (split > 1) fp32 added into `out` (zeroed by the caller)."""
    t, k = xq.shape
    if t > 64:
        raise ValueError(f"imma: {t} activation rows; the prototype's tile holds at most 64")
    g = k // 32
    if out is None:
        out = torch.empty(
            t, n, device=xq.device, dtype=torch.float16 if split == 1 else torch.float32
        )
    assert g % split == 0, (g, split)
    per = g // split
    p = planes + [planes[0]] * (4 - len(planes))
    _imma_kernel[(triton.cdiv(n, bn), split)](
        xq, xs, p[0], p[1], p[2], p[3], out, t, n, g, max(g // 8, 1), per,
        FMT=FMT_CODES[fmt], BN=bn, BT=max(16, triton.next_power_of_2(t)), ATOMIC=split > 1,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out


def reference(xq: torch.Tensor, xs: torch.Tensor, w) -> torch.Tensor:  # noqa: ANN001
    """x (dequantized from its int8 form, element order) @ W^T (dequantized), fp32."""
    from localllm.kernels.quant import kernel_facts

    t, k = xq.shape
    # "w4" byte 16 t + 4 w + j of a group is element 8 j + 4 t + w
    pos = torch.arange(32)
    tt, ww, jj = pos // 16, (pos // 4) % 4, pos % 4
    elem = 8 * jj + 4 * tt + ww
    xg = xq.reshape(t, -1, 32).float()
    xe = torch.empty_like(xg)
    xe[:, :, elem] = xg
    x = (xe * xs[:, :, :1]).reshape(t, k)
    facts = kernel_facts(w.fmt)
    wd = facts.dequant(w.tensors, w.n, w.k)
    return x @ wd.float().T


CONFIGS = [  # (BN, warps, split, stages)
    (16, 1, 1, 3),
    (32, 1, 1, 3),
    (32, 2, 1, 3),
    (64, 4, 1, 3),
    (64, 4, 1, 4),
    (16, 1, 2, 3),
    (32, 2, 2, 3),
    (64, 4, 2, 3),
    (64, 4, 4, 3),
    (128, 4, 2, 3),
    (64, 8, 1, 3),  # 32-64 rows (session 32): wider tiles, 8 warps
    (128, 8, 1, 3),
    (128, 8, 2, 3),
    (128, 4, 1, 3),
]


def qmm_us(fmt: str, n: int, k: int, t: int, sets: list, sms: int) -> float:
    """The engine's `_qmm_kernel` at its dispatch's config for t rows, weights cycled from
    memory as the prototype's are (`probe_qmm.time_us`)."""
    from probe_qmm import mm, time_us

    from localllm.kernels.device import device_props

    props = device_props(torch.device("cuda"))
    cfg = mm.mm_config(fmt, n, k, t, sms, props.smem_per_block, props.arch)
    return time_us(mm, torch.randn(t, k, device="cuda").half(), sets, fmt, n, cfg)


def main() -> None:
    from ab_dp4a import dp4a_us
    from bench_qlinear import cold_planes, dispatch_inputs
    from sweep_dp4a import SHAPES
    from triton.testing import do_bench_cudagraph

    from localllm.kernels.device import device_props

    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="2,3,4,8,9,10")
    ap.add_argument("--rows", default="1,5,16")
    ap.add_argument("--configs", default="", help="indices into CONFIGS (default all)")
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    sms = device_props(torch.device("cuda")).sm_count
    outf = open(os.path.join(os.environ.get("OUT", "."), "proto_imma.jsonl"), "a")
    cfgs = [CONFIGS[int(i)] for i in a.configs.split(",")] if a.configs else CONFIGS
    for i in [int(s) for s in a.shapes.split(",")]:
        fmt, n, k = SHAPES[i]
        w, sets = cold_planes(fmt, n, k)
        copies = len(sets)
        for t in [int(r) for r in a.rows.split(",")]:
            xq, xs, dcfg = dispatch_inputs(fmt, n, k, t, sms)
            ref = reference(xq, xs, w)
            rec = dict(tag=a.tag, fmt=fmt, n=n, k=k, rows=t)
            if t <= 6:
                rec["dp4a_us"] = round(dp4a_us(xq, xs, dcfg, fmt, n, sets), 2)
            else:  # the engine's fused dequant GEMM on the same weights (fp16 activations)
                rec["qmm_us"] = round(qmm_us(fmt, n, k, t, sets, sms), 2)
            best = None
            for cfg in cfgs:
                name = "bn{}w{}k{}s{}".format(*cfg)
                try:
                    o = torch.zeros(t, n, device="cuda") if cfg[2] > 1 else None
                    got = imma(xq, xs, sets[0], fmt, n, cfg[0], cfg[1], cfg[2], cfg[3], out=o)
                    err = ((got.float() - ref).abs().max() / ref.abs().max()).item()
                    if err > 2e-3:
                        rec[name] = f"wrong {err:.2e}"
                        continue
                    outs = [torch.zeros(t, n, device="cuda") if cfg[2] > 1 else None for _ in sets]

                    def run(xq=xq, xs=xs, fmt=fmt, n=n, sets=sets, outs=outs, cfg=cfg) -> None:
                        for ps, o in zip(sets, outs):
                            imma(xq, xs, ps, fmt, n, cfg[0], cfg[1], cfg[2], cfg[3], out=o)

                    us = do_bench_cudagraph(run, rep=30) * 1e3 / copies
                except Exception as e:  # noqa: BLE001 (a prototype sweep: record and go on)
                    rec[name] = f"error {type(e).__name__}: {str(e)[:80]}"
                    continue
                rec[name] = round(us, 2)
                if best is None or us < best[1]:
                    best = (name, round(us, 2))
            rec["best"] = best
            print(json.dumps(rec), flush=True)
            outf.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
