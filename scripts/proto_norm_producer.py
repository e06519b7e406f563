"""Prototype (outside the engine): a one-row dp4a GEMV whose programs own whole 32-row groups of
the output, so the next RMSNorm's work fits in its epilogue without counters (issue 16: the
RMSNorm launches are the largest batch-1 lever left, session 11 bounded them at +8.2% llama2,
+6.8% llama3; the fusions built so far lost to a counter + fence per program, or kept 32 rows of
weight words in every thread's registers and ran at 30-52 tok/s).

Here a program takes its 32 rows as SB sub-blocks of BN = 32 / SB rows. Each sub-block is the
engine GEMV's own [NG, BN] tile (lanes and warps along the groups, rows in registers, the same
`dp4a_load` / `dp4a_group` hooks), so the registers hold one sub-block's words (plus the next
one's in flight), not 32 rows'. The epilogue then has all 32 outputs of its group:
  r = fp16(fp16(x W^T) + residual)        stored (the residual stream)
  y = r * gamma                            quantized per the group: int8 + stats ("w4" / "w8")
  ss[program] = sum(r^2)                   the next GEMV scales its dot products by
                                           rsqrt(sum(ss) / D + eps) (the norm's one factor)
MODE 0: a flattened pipeline, the next sub-block's loads in flight while one computes. MODE 1:
all SB sub-blocks of a K step loaded together, the first step's before the PDL wait.

`--check`: against torch (interpreter or GPU, small shapes). `--time`: CUDA-graph chains of
L "layers" of [producer, next GEMV] against [GEMV, add_rms_norm, next GEMV] on the engine's
kernels, weights read from memory, us per layer. JSON lines to $OUT/proto_norm_producer.jsonl.
`--compile 90,86`: registers, spills and loop sizes of each config, compiled here (no GPU).
It lost on every shape (BENCHMARKS.md, session 35): 128 programs cannot stream the weights.

Usage: python3 scripts/proto_norm_producer.py --check
       python3 scripts/proto_norm_producer.py --time [--layers 16] [--configs SB:WARPS:MODE,...]
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
from localllm.kernels.fused.quant_act import ACT_LAYOUT
from localllm.kernels.fused.quant_act_triton import _quant_store
from localllm.kernels.linear.dp4a_triton import _group_mask, format_constexprs
from localllm.kernels.linear.gemv_core_triton import plane_args
from localllm.kernels.pdl import pdl_args, pdl_trigger, pdl_wait
from localllm.kernels.quant import kernel_facts


@triton.jit
def _rows(r0, b: tl.constexpr, BN: tl.constexpr):
    return (r0 + b * BN + tl.arange(0, BN)).to(tl.int64)


@triton.jit
def _pick(b: tl.constexpr, a0, a1, a2, a3, a4, a5, a6, a7):
    """a_b (b a constexpr)."""
    r = a0
    if b == 1:
        r = a1
    if b == 2:
        r = a2
    if b == 3:
        r = a3
    if b == 4:
        r = a4
    if b == 5:
        r = a5
    if b == 6:
        r = a6
    if b == 7:
        r = a7
    return r


@triton.jit
def _put(b: tl.constexpr, v, a0, a1, a2, a3, a4, a5, a6, a7):
    """(a0, .., a7) with a_b replaced by v."""
    if b == 0:
        a0 = v
    if b == 1:
        a1 = v
    if b == 2:
        a2 = v
    if b == 3:
        a3 = v
    if b == 4:
        a4 = v
    if b == 5:
        a5 = v
    if b == 6:
        a6 = v
    if b == 7:
        a7 = v
    return a0, a1, a2, a3, a4, a5, a6, a7


@triton.jit
def _acc_add(GROUP: tl.constexpr, b: tl.constexpr, a0, a1, a2, a3, a4, a5, a6, a7, w, e, s0, m0,
             s1, m1, xw, xs, g, gm, EMU: tl.constexpr):  # fmt: skip
    """Sub-block b's accumulator plus the K step's group dot products."""
    acc = GROUP(_pick(b, a0, a1, a2, a3, a4, a5, a6, a7), w, e, s0, m0, s1, m1, xw, xs, g, gm, EMU)
    return _put(b, acc, a0, a1, a2, a3, a4, a5, a6, a7)


@triton.jit
def _cat(a, b):
    """[N] a, [N] b -> [2N] a then b."""
    return tl.reshape(tl.permute(tl.join(a, b), (1, 0)), [2 * a.shape[0]])


@triton.jit
def _outputs(SB: tl.constexpr, a0, a1, a2, a3, a4, a5, a6, a7):
    """The group's 32 outputs in row order from the sub-blocks' accumulators [NG, 32 / SB]."""
    h0, h1, h2, h3 = tl.sum(a0, axis=0), tl.sum(a1, axis=0), tl.sum(a2, axis=0), tl.sum(a3, axis=0)
    h4, h5, h6, h7 = tl.sum(a4, axis=0), tl.sum(a5, axis=0), tl.sum(a6, axis=0), tl.sum(a7, axis=0)
    if SB == 1:
        h = h0
    elif SB == 2:
        h = _cat(h0, h1)
    elif SB == 4:
        h = _cat(_cat(h0, h1), _cat(h2, h3))
    else:
        h = _cat(_cat(_cat(h0, h1), _cat(h2, h3)), _cat(_cat(h4, h5), _cat(h6, h7)))
    return h


@triton.jit
def _producer_kernel(
    xq_ptr, xs_ptr, p0, p1, p2, p3, p4, R, GAMMA, R_OUT, XQ, XS, SS, G,
    LOAD: tl.constexpr, GROUP: tl.constexpr, BN: tl.constexpr, SB: tl.constexpr,
    NG: tl.constexpr, MODE: tl.constexpr, EVEN: tl.constexpr, W8: tl.constexpr,
    EMU: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    pdl_trigger(PDL)
    pid = tl.program_id(0)
    r0 = pid * 32
    xw = xq_ptr.to(tl.pointer_type(tl.int32))
    n_steps = tl.cdiv(G, NG)
    g = tl.arange(0, NG)
    gm = _group_mask(g, G, EVEN)
    a0 = tl.zeros([NG, BN], dtype=tl.float32)
    a1, a2, a3, a4, a5, a6, a7 = a0, a0, a0, a0, a0, a0, a0
    if MODE == 0:
        w, e, s0, m0, s1, m1 = LOAD(p0, p1, p2, p3, p4, _rows(r0, 0, BN), g, gm, G)
        pdl_wait(PDL)
        for _ in range(n_steps):
            gm = _group_mask(g, G, EVEN)
            gn = g + NG
            for b in tl.static_range(SB):
                if b + 1 < SB:
                    nw, ne, ns0, nm0, ns1, nm1 = LOAD(p0, p1, p2, p3, p4, _rows(r0, b + 1, BN),
                                                      g, gm, G)  # fmt: skip
                else:
                    nw, ne, ns0, nm0, ns1, nm1 = LOAD(p0, p1, p2, p3, p4, _rows(r0, 0, BN), gn,
                                                      gn < G, G)  # fmt: skip
                a0, a1, a2, a3, a4, a5, a6, a7 = _acc_add(
                    GROUP, b, a0, a1, a2, a3, a4, a5, a6, a7, w, e, s0, m0, s1, m1, xw, xs_ptr,
                    g, gm, EMU)  # fmt: skip
                w, e, s0, m0, s1, m1 = nw, ne, ns0, nm0, ns1, nm1
            g = gn
    else:
        # the first step's sub-blocks before the wait (weights are constant)
        w0, e0, s00, m00, s10, m10 = LOAD(p0, p1, p2, p3, p4, _rows(r0, 0, BN), g, gm, G)
        w1, e1, s01, m01, s11, m11 = w0, e0, s00, m00, s10, m10
        w2, e2, s02, m02, s12, m12 = w0, e0, s00, m00, s10, m10
        w3, e3, s03, m03, s13, m13 = w0, e0, s00, m00, s10, m10
        if SB > 1:
            w1, e1, s01, m01, s11, m11 = LOAD(p0, p1, p2, p3, p4, _rows(r0, 1, BN), g, gm, G)
        if SB > 2:
            w2, e2, s02, m02, s12, m12 = LOAD(p0, p1, p2, p3, p4, _rows(r0, 2, BN), g, gm, G)
        if SB > 3:
            w3, e3, s03, m03, s13, m13 = LOAD(p0, p1, p2, p3, p4, _rows(r0, 3, BN), g, gm, G)
        pdl_wait(PDL)
        for step in range(n_steps):
            gm = _group_mask(g, G, EVEN)
            if step > 0:
                w0, e0, s00, m00, s10, m10 = LOAD(p0, p1, p2, p3, p4, _rows(r0, 0, BN), g, gm, G)
                if SB > 1:
                    w1, e1, s01, m01, s11, m11 = LOAD(p0, p1, p2, p3, p4, _rows(r0, 1, BN), g,
                                                      gm, G)  # fmt: skip
                if SB > 2:
                    w2, e2, s02, m02, s12, m12 = LOAD(p0, p1, p2, p3, p4, _rows(r0, 2, BN), g,
                                                      gm, G)  # fmt: skip
                if SB > 3:
                    w3, e3, s03, m03, s13, m13 = LOAD(p0, p1, p2, p3, p4, _rows(r0, 3, BN), g,
                                                      gm, G)  # fmt: skip
            a0 = GROUP(a0, w0, e0, s00, m00, s10, m10, xw, xs_ptr, g, gm, EMU)
            if SB > 1:
                a1 = GROUP(a1, w1, e1, s01, m01, s11, m11, xw, xs_ptr, g, gm, EMU)
            if SB > 2:
                a2 = GROUP(a2, w2, e2, s02, m02, s12, m12, xw, xs_ptr, g, gm, EMU)
            if SB > 3:
                a3 = GROUP(a3, w3, e3, s03, m03, s13, m13, xw, xs_ptr, g, gm, EMU)
            g = g + NG
    # epilogue: the group's 32 outputs, residual add, sum of squares, y = r * gamma quantized
    cols = r0 + tl.arange(0, 32)
    h = _outputs(SB, a0, a1, a2, a3, a4, a5, a6, a7)
    h = h.to(R_OUT.dtype.element_ty).to(tl.float32)  # what the unfused GEMV would store
    r = (h + tl.load(R + cols).to(tl.float32)).to(R_OUT.dtype.element_ty)
    tl.store(R_OUT + cols, r)
    rf = r.to(tl.float32)
    tl.store(SS + pid, tl.sum(rf * rf, axis=0))
    _quant_store(rf * tl.load(GAMMA + cols).to(tl.float32), r0, r0 + 32, XQ, XS, 32, W8)


def producer(xq, xs, planes, fmt, n, residual, gamma, sb, warps, mode, out=None):  # noqa: ANN001, ANN201
    """(r [1, N] fp16, xq int8 [1, N], xs fp32 [1, N / 32, 4], ss fp32 [N / 32]); `sb` of 1,
    2, 4 or 8 sub-blocks (MODE 1 holds at most 4 in registers)."""
    if sb not in (1, 2, 4, 8) or (mode == 1 and sb > 4):
        raise ValueError(f"producer: {sb} sub-blocks in mode {mode}")
    k = xq.shape[1]
    groups = k // kernel_facts(fmt).group
    ng = min(32 * warps, triton.next_power_of_2(groups))
    if out is None:
        out = (torch.empty_like(residual), torch.empty((1, n), dtype=torch.int8, device=xq.device),
               torch.empty((1, n // 32, 4), dtype=torch.float32, device=xq.device),
               torch.empty((n // 32,), dtype=torch.float32, device=xq.device))  # fmt: skip
    r_out, oq, os_, ss = out
    _producer_kernel[(n // 32,)](
        xq, xs, *plane_args(planes), residual, gamma, r_out, oq, os_, ss, groups,
        **format_constexprs(fmt), BN=32 // sb, SB=sb, NG=ng, MODE=mode,
        EVEN=groups % ng == 0, W8=ACT_LAYOUT[fmt] == "w8", EMU=interpreting(),
        num_warps=max(1, min(warps, ng // 32)), num_stages=1, **pdl_args(xq.device),
    )  # fmt: skip
    return out


def _reference(xq, xs, w, residual, gamma, layout):  # noqa: ANN001, ANN201
    """The GEMV in fp16 (as the engine's), r = fp16(h + residual), the int8 form of r * gamma
    (raw: the norm's factor pending) and sum(r^2) per group."""
    from localllm.kernels.fused.quant_act import dequant_act, quant_act_ref
    from localllm.kernels.linear.qlinear import dequantize_weight

    x = dequant_act(xq, xs, layout).double()  # [1, K]
    h = (x @ dequantize_weight(w).double().t()).half()
    r = (h.float() + residual.float()).half()
    y = r.float() * gamma.float()
    q, s = quant_act_ref(y, layout)
    return r, q, s, (r.float() ** 2).view(-1, 32).sum(1)


def _check(device: str) -> None:
    from gguf import GGMLQuantizationType as QT

    from localllm.kernels.fused.quant_act import quant_act_ref
    from localllm.kernels.linear.qlinear import pack_weight

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from test_kernels_qlinear import random_raw  # type: ignore[import-not-found]

    torch.manual_seed(0)
    cases = [("Q4_0", 64, 256, 4, 1, 0), ("Q4_0", 64, 768, 4, 2, 1), ("Q4_K", 64, 512, 2, 1, 0),
             ("Q4_K", 32, 768, 4, 2, 1), ("Q6_K", 64, 256, 8, 1, 0), ("Q8_0", 32, 256, 4, 2, 1),
             ("Q4_0", 32, 768, 4, 2, 0)]  # fmt: skip
    for qname, n, k, sb, warps, mode in cases:
        w = pack_weight(random_raw(QT[qname], n, k, seed=n + k), device)
        fmt = w.fmt
        layout = ACT_LAYOUT[fmt]
        xq, xs = quant_act_ref(torch.randn(1, k, device=device), layout)
        residual = torch.randn(1, n, device=device).half()
        gamma = (torch.rand(n, device=device) + 0.5).half()
        planes = [w.tensors[p] for p in kernel_facts(fmt).planes]
        r, oq, os_, ss = producer(xq, xs, planes, fmt, n, residual, gamma, sb, warps, mode)
        rr, rq, rs, rss = _reference(xq, xs, w, residual, gamma, layout)
        dr = (r.float() - rr.float()).abs().max().item()
        dss = ((ss - rss).abs() / rss).max().item()
        dq = (oq.int() - rq.int()).abs().max().item()
        ds = ((os_ - rs).abs().max() / rs.abs().max()).item()
        rec = dict(fmt=fmt, n=n, k=k, sb=sb, warps=warps, mode=mode, r=dr, ss=dss, q=dq, stats=ds)
        print(json.dumps(rec), flush=True)
        assert dr < 2e-2 and dss < 1e-3 and dq <= 1 and ds < 1e-2, rec


# (fmt, N, K) of the projections back into the residual stream: O and down, llama2 / llama3
SHAPES = [("q4_0", 4096, 4096), ("q4_0", 4096, 11008), ("q4_k", 4096, 4096), ("q4_k", 4096, 14336),
          ("q6_k", 4096, 14336)]  # fmt: skip


def parse_configs(spec: str) -> list[tuple[int, int, int]]:
    """ "SB:WARPS:MODE,..." -> [(sb, warps, mode)]."""
    return [tuple(int(v) for v in c.split(":")) for c in spec.split(",")]  # type: ignore[misc]


def _compile(archs: list[int], configs: str) -> None:
    """Registers, spills and loop sizes of each config at the SHAPES, compiled for each arch."""
    from localllm.kernels import pdl
    from localllm.kernels.checks.capture import capture
    from localllm.kernels.checks.compile import compile_launch

    meta = torch.device("meta")
    for fmt, n, k in SHAPES:
        f = kernel_facts(fmt)
        from localllm.kernels.linear.qlinear import QuantWeight  # noqa: F401

        planes = [torch.empty(s, dtype=d, device=meta) for s, d in _plane_shapes(fmt, n, k)]
        xq = torch.empty((1, k), dtype=torch.int8, device=meta)
        xs = torch.empty((1, k // 32, 4), dtype=torch.float32, device=meta)
        res = torch.empty((1, n), dtype=torch.float16, device=meta)
        gamma = torch.empty((n,), dtype=torch.float16, device=meta)
        for sb, warps, mode in parse_configs(configs):
            for arch in archs:
                with pdl.forced(arch >= 90), capture() as launches:
                    producer(xq, xs, planes, fmt, n, res, gamma, sb, warps, mode)
                r = compile_launch(launches[0], arch)
                print(json.dumps(dict(fmt=fmt, n=n, k=k, sb=sb, warps=warps, mode=mode,
                                      arch=arch, regs=r.registers, spill=r.spill,
                                      smem=r.shared, loops=r.loops)), flush=True)  # fmt: skip
        del f


def _plane_shapes(fmt: str, n: int, k: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """The kernel planes' shapes and dtypes of an [n, k] weight (packed from a zero weight)."""
    from gguf import GGMLQuantizationType as QT

    from localllm.kernels.linear.qlinear import pack_weight

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from test_kernels_qlinear import random_raw  # type: ignore[import-not-found]

    w = pack_weight(random_raw(QT[fmt.upper()], 32, k), "cpu")
    out = []
    for p in kernel_facts(fmt).planes:
        t = w.tensors[p]
        out.append(((n * t.shape[0] // 32, *t.shape[1:]), t.dtype))
    return out


# producer (fmt, N, K) -> the GEMV that reads its output: O -> gate+up, down -> q+k+v
PAIRS = {
    "llama2 o": (("q4_0", 4096, 4096), ("q4_0", 22016, 4096)),
    "llama2 down": (("q4_0", 4096, 11008), ("q4_0", 12288, 4096)),
    "llama3 o": (("q4_k", 4096, 4096), ("q4_k", 28672, 4096)),
    "llama3 down": (("q4_k", 4096, 14336), ("q4_k", 6144, 4096)),
}


def _time(configs: str, layers: int) -> None:
    """us per layer of CUDA-graph chains (PDL as the engine launches), weights from memory:
    base = [GEMV, add_rms_norm (int8 out), next GEMV], fused = [producer, next GEMV]; and each
    producer config alone against the engine's GEMV alone."""
    out = open(os.path.join(os.environ.get("OUT", "."), "proto_norm_producer.jsonl"), "a")

    def emit(rec: dict) -> None:
        print(json.dumps(rec), flush=True)
        out.write(json.dumps(rec) + "\n")

    for name, pair in PAIRS.items():
        _time_pair(name, pair, parse_configs(configs), layers, emit)
        torch.cuda.empty_cache()


def _time_pair(name: str, pair: tuple, configs: list, layers: int, emit) -> None:  # noqa: ANN001
    from bench_qlinear import random_weight  # type: ignore[import-not-found]
    from triton.testing import do_bench_cudagraph

    from localllm.kernels.device import device_props
    from localllm.kernels.fused.norm_triton import add_rms_norm
    from localllm.kernels.fused.quant_act_triton import quant_act_triton
    from localllm.kernels.linear import dp4a_triton as dp

    sms = device_props(torch.device("cuda")).sm_count
    (fa, na, ka), (fb, nb, kb) = pair
    pa = [[random_weight(fa, na, ka).tensors[p] for p in kernel_facts(fa).planes]
          for _ in range(layers)]  # fmt: skip
    pb = [[random_weight(fb, nb, kb).tensors[p] for p in kernel_facts(fb).planes]
          for _ in range(layers)]  # fmt: skip
    la, lb = ACT_LAYOUT[fa], ACT_LAYOUT[fb]
    xq, xs = quant_act_triton(torch.randn(1, ka, device="cuda").half(), la)
    residual = torch.randn(1, na, device="cuda").half()
    gamma = (torch.rand(na, device="cuda") + 0.5).half()
    cfg_a = dp.dp4a_config(fa, na, ka, sms, 1)
    cfg_b = dp.dp4a_config(fb, nb, kb, sms, 1)

    def base() -> None:
        for i in range(layers):
            h = dp.dp4a_launch(xq, xs, pa[i], fa, na, None, cfg_a, torch.float16)
            x, _ = add_rms_norm(h, residual, gamma, 1e-5, quant=lb)
            q, s = x.q[lb]
            dp.dp4a_launch(q, s, pb[i], fb, nb, None, cfg_b, torch.float16)

    def gemv_alone() -> None:
        for i in range(layers):
            dp.dp4a_launch(xq, xs, pa[i], fa, na, None, cfg_a, torch.float16)

    t_base = do_bench_cudagraph(base, rep=30) * 1e3 / layers
    t_gemv = do_bench_cudagraph(gemv_alone, rep=30) * 1e3 / layers
    emit(dict(pair=name, variant="base", us_layer=round(t_base, 2), gemv_us=round(t_gemv, 2),
              cfg=str(cfg_a)))  # fmt: skip
    for sb, warps, mode in configs:
        bufs = producer(xq, xs, pa[0], fa, na, residual, gamma, sb, warps, mode)

        def fused(sb: int = sb, warps: int = warps, mode: int = mode, bufs=bufs) -> None:  # noqa: ANN001
            for i in range(layers):
                _, q, s, _ = producer(xq, xs, pa[i], fa, na, residual, gamma, sb, warps, mode,
                                      bufs)  # fmt: skip
                dp.dp4a_launch(q, s, pb[i], fb, nb, None, cfg_b, torch.float16)

        def alone(sb: int = sb, warps: int = warps, mode: int = mode, bufs=bufs) -> None:  # noqa: ANN001
            for i in range(layers):
                producer(xq, xs, pa[i], fa, na, residual, gamma, sb, warps, mode, bufs)

        try:
            t_f = do_bench_cudagraph(fused, rep=30) * 1e3 / layers
            t_a = do_bench_cudagraph(alone, rep=30) * 1e3 / layers
        except Exception as e:  # noqa: BLE001
            emit(dict(pair=name, sb=sb, warps=warps, mode=mode, error=str(e)[:200]))
            continue
        emit(dict(pair=name, variant="fused", sb=sb, warps=warps, mode=mode,
                  us_layer=round(t_f, 2), producer_us=round(t_a, 2),
                  gain_us=round(t_base - t_f, 2)))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--layers", type=int, default=16, help="chain length (distinct weights)")
    ap.add_argument("--compile", default="", help="archs to compile for (e.g. 90,86): resources")
    ap.add_argument("--configs", default="4:4:0,4:4:1,8:4:0,4:2:0,4:8:0,2:4:0")
    a = ap.parse_args()
    if a.check:
        _check("cuda" if torch.cuda.is_available() and not interpreting() else "cpu")
    if a.compile:
        _compile([int(x) for x in a.compile.split(",")], a.configs)
    if a.time:
        _time(a.configs, a.layers)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    main()
