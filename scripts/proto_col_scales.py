"""Prototype (outside the engine): what the one-row dp4a GEMV pays for int8 activations with one
scale per *word column* of a group instead of one per group (issue 16, the RMSNorm launches).

Why: a weight word w of a 4-bit group meets the activation elements w, w + 4, ..., w + 28 (its
two `dp4a`s; `fused/quant_act.py`, layout "w4"). If each of those 8-element columns had its own
scale, a GEMV program that owns 8 output rows strided by 4 (one column of a group) could
quantize its own outputs: the norm's residual add and quantization would fit in the O / down
GEMV's epilogue with no counter and no whole-group program (session 35's whole-group producer
lost: 128 programs do not stream the weights). The next GEMV would then apply 4 scales per
group and row instead of one:
  today    d (dx S - 8 X)                      (Q4_0; S: the group's 8 dp4a sums)
  columns  d (sum_w dx_w S_w - 8 X)            (S_w: word w's 2 dp4a sums, X = sum_w dx_w q_w)
i.e. 3 more int-to-float conversions and 3 more FMAs per group and row. This script times that
consumer against today's at the engine's one-row configs (weights from memory, CUDA graphs)
and checks it against torch under the interpreter. Its stats are 8 fp32 a group (dx_0..3, X);
the engine patch that built the whole fusion (`benchmarks/session35/norm_fusion.patch`, 16 fp32
a group) lost end to end (BENCHMARKS.md, session 35).

Usage: python3 scripts/proto_col_scales.py --check      (interpreter or GPU)
       python3 scripts/proto_col_scales.py --time       (GPU; JSON lines to $OUT/proto_col_scales.jsonl)
       python3 scripts/proto_col_scales.py --compile 90,86   (SASS loop size, registers)
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import triton
import triton.language as tl

from localllm.kernels.device import interpreting
from localllm.kernels.fused.quant_act import GROUP, element_of_byte
from localllm.kernels.linear import dp4a_triton as dp
from localllm.kernels.linear.gemv_core_triton import plane_args
from localllm.kernels.pdl import pdl_args
from localllm.kernels.quant import dp4a_ops_triton as dq
from localllm.kernels.quant import kernel_facts
from localllm.kernels.quant import nibbles_triton as nib
from localllm.kernels.quant.ops_triton import split4


@triton.jit
def _col_sums(words, extra, xw, g, gmask, EMU: tl.constexpr):
    """Four int32 [NG, BN]: each word's two dp4a sums with its activation column."""
    w0, w1, w2, w3 = split4(words)
    e0, e1, e2, e3 = split4(extra)
    l0, l1, l2, l3 = dq.act_words(xw, g, gmask, 0, 8)
    h0, h1, h2, h3 = dq.act_words(xw, g, gmask, 4, 8)
    z = tl.zeros(w0.shape, dtype=tl.int32)
    c0 = dq._word_dot(nib.dp4a_bytes, z, w0, e0, l0, h0, EMU)
    c1 = dq._word_dot(nib.dp4a_bytes, z, w1, e1, l1, h1, EMU)
    c2 = dq._word_dot(nib.dp4a_bytes, z, w2, e2, l2, h2, EMU)
    c3 = dq._word_dot(nib.dp4a_bytes, z, w3, e3, l3, h3, EMU)
    return c0, c1, c2, c3


@triton.jit
def _col_dot(words, extra, xw, xs, g, gmask, EMU: tl.constexpr):
    """(sum_w dx_w S_w, X) [NG, BN] / [NG, 1]; xs: 8 fp32 a group (dx_0..3, X, 3 unused)."""
    c0, c1, c2, c3 = _col_sums(words, extra, xw, g, gmask, EMU)
    xp = xs + (g * 8)[:, None, None] + tl.arange(0, 4)[None, None, :]  # [NG, 1, 4]
    d0, d1, d2, d3 = split4(tl.load(xp, mask=gmask[:, None, None], other=0.0))
    x, _, _, _ = split4(tl.load(xp + 4, mask=gmask[:, None, None], other=0.0))
    dot = d0 * c0.to(tl.float32) + d1 * c1.to(tl.float32)
    dot += d2 * c2.to(tl.float32) + d3 * c3.to(tl.float32)
    return dot, x


@triton.jit
def q4_0_group_cols(acc, words, extra, s0, m0, s1, m1, xw, xs, g, gmask, EMU: tl.constexpr):
    """d (sum_w dx_w S_w - 8 X)."""
    dot, x = _col_dot(words, extra, xw, xs, g, gmask, EMU)
    acc += s0 * (dot - 8.0 * x)
    return acc


@triton.jit
def q4_k_group_cols(acc, words, extra, s0, m0, s1, m1, xw, xs, g, gmask, EMU: tl.constexpr):
    """d sc sum_w dx_w S_w - dmin m X."""
    dot, x = _col_dot(words, extra, xw, xs, g, gmask, EMU)
    acc += s0 * dot - m0 * x
    return acc


COL_GROUP = {"q4_0": q4_0_group_cols, "q4_k": q4_k_group_cols}


def quant_cols_ref(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, K] -> (xq int8 [T, K] in "w4" byte order, xs fp32 [T, K / 32, 8]): one scale per
    word column (elements w, w + 4, .., w + 28 of a group: bytes 4 w .. 4 w + 3 and 16 + 4 w ..
    16 + 4 w + 3)."""
    t, k = x.shape
    e = element_of_byte("w4").to(x.device)
    xg = x.float().reshape(t, k // GROUP, GROUP)[:, :, e]  # [T, G, 32] in byte order
    col = (torch.arange(GROUP, device=x.device) // 4) % 4  # byte -> word column
    amax = torch.stack([xg[:, :, col == w].abs().amax(-1) for w in range(4)], -1)  # [T, G, 4]
    dx = amax / 127.0
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    q = torch.floor(xg * inv[:, :, col] + 0.5).clamp(-127, 127)
    xsum = sum(dx[:, :, w] * q[:, :, col == w].sum(-1) for w in range(4))
    xs = torch.zeros(t, k // GROUP, 8, device=x.device)
    xs[:, :, :4] = dx
    xs[:, :, 4] = xsum
    return q.to(torch.int8).reshape(t, k), xs


def dequant_cols(xq: torch.Tensor, xs: torch.Tensor) -> torch.Tensor:
    t, k = xq.shape
    e = element_of_byte("w4").to(xq.device)
    col = (torch.arange(GROUP, device=xq.device) // 4) % 4
    v = xq.float().reshape(t, k // GROUP, GROUP) * xs[:, :, col]
    out = torch.empty_like(v)
    out[:, :, e] = v
    return out.reshape(t, k)


def launch(xq, xs, planes, fmt, n, cfg, cols: bool, out=None):  # noqa: ANN001, ANN201
    """The engine's `_dp4a_kernel` (one row, config `cfg`) with today's group function or the
    column one (`cols`: xs holds 8 fp32 a group)."""
    t, k = xq.shape
    groups = k // kernel_facts(fmt).group
    ng, per_split, split = dp.split_groups(cfg, groups)
    if out is None:
        out = (torch.zeros if split > 1 else torch.empty)(
            (t, n), device=xq.device, dtype=torch.float32
        )
    consts = dp.kernel_constexprs(fmt, cfg.bn, ng, groups, 1, split > 1, False, interpreting())
    if cols:
        consts["GROUP"] = COL_GROUP[fmt]
    dp._dp4a_kernel[(t, triton.cdiv(n, cfg.bn), split)](
        xq, xs, out, out, *plane_args(planes), t, n, groups, per_split, k // 4, xs.stride(0),
        out.stride(0), **consts, num_warps=dp.fitting_warps(cfg.warps, ng), num_stages=1,
        **pdl_args(xq.device),
    )  # fmt: skip
    return out


def _check(device: str) -> None:
    from gguf import GGMLQuantizationType as QT

    from localllm.kernels.linear.qlinear import dequantize_weight, pack_weight

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from test_kernels_qlinear import random_raw  # type: ignore[import-not-found]

    for qname, n, k, cfg in [("Q4_0", 16, 768, dp.Dp4aConfig(8, 2, 1)),
                             ("Q4_K", 16, 768, dp.Dp4aConfig(4, 1, 1)),
                             ("Q4_0", 16, 512, dp.Dp4aConfig(4, 1, 2))]:  # fmt: skip
        w = pack_weight(random_raw(QT[qname], n, k, seed=n + k), device)
        xq, xs = quant_cols_ref(torch.randn(1, k, device=device))
        planes = [w.tensors[p] for p in kernel_facts(w.fmt).planes]
        out = launch(xq, xs, planes, w.fmt, n, cfg, True)
        ref = dequant_cols(xq, xs).double() @ dequantize_weight(w).double().t()
        err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
        print(json.dumps(dict(fmt=w.fmt, n=n, k=k, cfg=str(cfg), err=err)), flush=True)
        assert err < 1e-5, (qname, err)


SHAPES = [("q4_0", 4096, 4096), ("q4_0", 22016, 4096), ("q4_0", 12288, 4096),
          ("q4_0", 4096, 11008), ("q4_k", 4096, 4096), ("q4_k", 28672, 4096),
          ("q4_k", 4096, 14336)]  # fmt: skip


def _time() -> None:
    from bench_qlinear import cold_planes  # type: ignore[import-not-found]
    from triton.testing import do_bench_cudagraph

    from localllm.kernels.device import device_props
    from localllm.kernels.fused.quant_act_triton import quant_act_triton

    sms = device_props(torch.device("cuda")).sm_count
    sink = open(os.path.join(os.environ.get("OUT", "."), "proto_col_scales.jsonl"), "a")
    for fmt, n, k in SHAPES:
        w, sets = cold_planes(fmt, n, k)
        x = torch.randn(1, k, device="cuda").half()
        xq, xs = quant_act_triton(x, "w4")
        cq, cs = quant_cols_ref(x)
        cfg = dp.dp4a_config(fmt, n, k, sms, 1)
        rec = dict(fmt=fmt, n=n, k=k, cfg=str(cfg))
        for rnd in range(2):
            for cols in (False, True):
                a, s = (cq, cs) if cols else (xq, xs)
                out = launch(a, s, sets[0], fmt, n, cfg, cols)

                def run(a=a, s=s, cols=cols, out=out, sets=sets, fmt=fmt, n=n, cfg=cfg) -> None:  # noqa: ANN001
                    for ps in sets:
                        launch(a, s, ps, fmt, n, cfg, cols, out)

                us = do_bench_cudagraph(run, rep=30) * 1e3 / len(sets)
                rec[f"{'cols' if cols else 'group'}_us_{rnd}"] = round(us, 2)
        print(json.dumps(rec), flush=True)
        sink.write(json.dumps(rec) + "\n")


def _compile(archs: list[int]) -> None:
    from proto_norm_producer import _plane_shapes  # type: ignore[import-not-found]

    from localllm.kernels import pdl
    from localllm.kernels.checks.capture import capture
    from localllm.kernels.checks.compile import compile_launch

    meta = torch.device("meta")
    for fmt, n, k in SHAPES:
        planes = [torch.empty(s, dtype=d, device=meta) for s, d in _plane_shapes(fmt, n, k)]
        cfg = dp.dp4a_config(fmt, n, k, 132, 1)
        xq = torch.empty((1, k), dtype=torch.int8, device=meta)
        for cols in (False, True):
            xs = torch.empty((1, k // 32, 8 if cols else 4), dtype=torch.float32, device=meta)
            out = torch.empty((1, n), dtype=torch.float32, device=meta)
            for arch in archs:
                with pdl.forced(arch >= 90), capture() as launches:
                    launch(xq, xs, planes, fmt, n, cfg, cols, out)
                r = compile_launch(launches[0], arch)
                print(json.dumps(dict(fmt=fmt, n=n, k=k, cols=cols, arch=arch, regs=r.registers,
                                      spill=r.spill, loops=r.loops)), flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--compile", default="")
    a = ap.parse_args()
    if a.check:
        _check("cuda" if torch.cuda.is_available() and not interpreting() else "cpu")
    if a.compile:
        _compile([int(v) for v in a.compile.split(",")])
    if a.time:
        _time()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    main()
