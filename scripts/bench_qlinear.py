"""Benchmark the Triton qlinear op on realistic 7-8B shapes with random GGUF blocks.

T=1 prints GB/s (packed weight + x + out bytes) and % of the 4.1 TB/s measured copy rate;
T=16 the same; T=512 prints TFLOP/s next to cuBLAS on an fp16 copy of the weight.
`--sweep FMTS` also times a few alternative configs per point (to refine the heuristic table).
Usage: python3 scripts/bench_qlinear.py [--fmts q4_k,q6_k] [--sweep q4_k] [--ts 1,16]
       [--budget 200]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace

import torch
import triton
from triton.testing import do_bench

from localllm.formats.gguf import RawTensor
from localllm.formats.quants import LAYOUTS
from localllm.kernels.linear.qlinear import QuantWeight, pack_weight
from localllm.kernels.linear.qlinear_triton import (
    MODE_DOT,
    MODE_VEC,
    QLinearConfig,
    group_size,
    pick_config,
    qlinear_launch,
    qlinear_triton,
)
from localllm.kernels.plan import DOT_MAX_T

PEAK_BW = 4.1e12  # H200 device-to-device copy, bytes/s (ANCHORS.md)
QTYPES = {"q4_k": "Q4_K", "q6_k": "Q6_K", "q4_0": "Q4_0", "q8_0": "Q8_0", "q5_k": "Q5_K"}
SHAPES = [(4096, 4096), (6144, 4096), (28672, 4096), (4096, 14336), (4096, 11008)]
LM_HEAD = (128256, 4096)  # Q6_K only, as in Q4_K_M files
# (mode, bm, bn, groups per step, warps); MODE_VEC steps are 32 * warps groups unless given
# (MODE_VEC sweeps run the packed-fp16 GEMV where the format has one)
SWEEP = {
    1: [(MODE_VEC, 1, 8, 0, 1), (MODE_VEC, 1, 8, 0, 2), (MODE_VEC, 1, 2, 0, 2)],
    16: [(MODE_DOT, 16, 64, 8, 4), (MODE_DOT, 16, 128, 8, 4), (MODE_DOT, 16, 64, 4, 4),
         (MODE_DOT, 16, 128, 8, 8)],
    512: [],
}  # fmt: skip


def random_weight(fmt: str, n: int, k: int) -> QuantWeight:
    """Uniform random payload bytes, every fp16 scale field 0.002 (ANCHORS.md recipe)."""
    from gguf import GGMLQuantizationType as QT

    qtype = QT[QTYPES[fmt]]
    lay = LAYOUTS[qtype]
    blocks = torch.randint(0, 256, (n, k // lay.block_size, lay.type_size), dtype=torch.uint8,
                           device="cuda")  # fmt: skip
    half = torch.tensor([0.002], dtype=torch.float16).view(torch.uint8).cuda()
    for off in lay.f16_fields:
        blocks[:, :, off : off + 2] = half
    raw = RawTensor("w", qtype, (n, k), blocks.reshape(n, -1).cpu().numpy())
    return pack_weight(raw, "cuda")


def cold_planes(fmt: str, n: int, k: int) -> tuple[QuantWeight, list[list[torch.Tensor]]]:
    """A random weight and copies of its kernel planes (> 120 MiB in all: past the L2), so that
    calls cycling through them read the weights from memory, as a decode step does."""
    from localllm.kernels.quant import kernel_facts

    w = random_weight(fmt, n, k)
    copies = max(1, -(-120 * 2**20 // w.nbytes))
    return w, [[w.tensors[p].clone() for p in kernel_facts(fmt).planes] for _ in range(copies)]


def dispatch_inputs(fmt: str, n: int, k: int, rows: int, sms: int):  # noqa: ANN201
    """(xq, xs, cfg): `rows` random activation rows quantized to the format's int8 layout, and
    the dp4a config the dispatch picks for them on a GPU of `sms` SMs."""
    from localllm.kernels.fused.quant_act_triton import quant_act_triton
    from localllm.kernels.linear import dp4a_triton
    from localllm.kernels.quant import kernel_facts

    x = torch.randn(rows, k, device="cuda").half()
    xq, xs = quant_act_triton(x, kernel_facts(fmt).act_layout)
    return xq, xs, dp4a_triton.dp4a_config(fmt, n, k, sms, rows)


def _sweep_config(cfg: tuple[int, ...], fmt: str, n: int, k: int) -> QLinearConfig:
    mode, bm, bn, ng, warps = cfg
    group = group_size(fmt)
    tile = min(group * (ng or 32 * warps), triton.next_power_of_2(k))
    ctas, target = triton.cdiv(n, bn), 4 * torch.cuda.get_device_properties(0).multi_processor_count
    split = 1 if ctas >= target // 2 else min(k // tile, target // ctas)
    stages = 1 if mode == MODE_VEC else 2
    return QLinearConfig(
        mode, bm, bn, tile, split=split, warps=warps, stages=stages, half2=mode == MODE_VEC
    )


def time_point(w: QuantWeight, t: int, cfgs: list[QLinearConfig]) -> list[dict]:
    x = torch.randn(t, w.k, device="cuda").half()
    rows = []
    for cfg in cfgs:
        ms = do_bench(lambda cfg=cfg: qlinear_launch(x, w, None, cfg), warmup=10, rep=40)
        nbytes = w.nbytes + x.numel() * 2 + t * w.n * 2
        rows.append({"fmt": w.fmt, "n": w.n, "k": w.k, "t": t, "cfg": cfg.__dict__, "us": ms * 1e3,
                     "gbps": nbytes / ms / 1e6, "pct_bw": 100 * nbytes / (ms * 1e-3) / PEAK_BW,
                     "tflops": 2 * t * w.n * w.k / ms / 1e9})  # fmt: skip
    return rows


def cublas_tflops(n: int, k: int, t: int) -> float:
    a = torch.randn(t, k, device="cuda").half()
    b = torch.randn(n, k, device="cuda").half()
    ms = do_bench(lambda: torch.nn.functional.linear(a, b), warmup=10, rep=40)
    return 2 * t * n * k / ms / 1e9


def _show(r: dict, tag: str) -> None:
    c = r["cfg"]
    cfg = (
        f"mode={c['mode']} bm={c['bm']} bn={c['bn']} tile={c['tile']} split={c['split']} "
        f"w={c['warps']} h2={int(c['half2'])}"
    )
    print(f"{tag:7s} {r['fmt']:5s} {r['n']:6d}x{r['k']:<6d} T={r['t']:<4d} {r['us']:9.1f} us "
          f"{r['gbps']:7.0f} GB/s {r['pct_bw']:5.1f}% {r['tflops']:7.1f} TFLOP/s  {cfg}")  # fmt: skip


def bench_weight(w: QuantWeight, sweep: bool, results: list[dict], ts: tuple[int, ...]) -> None:
    dev = torch.device("cuda")
    for t in ts:
        if t > DOT_MAX_T:  # the prefill path: dequantize (`dequant_triton`) + cuBLAS
            x = torch.randn(t, w.k, device="cuda").half()
            ms = do_bench(lambda x=x: qlinear_triton(x, w), warmup=10, rep=40)
            tflops = 2 * t * w.n * w.k / ms / 1e9
            print(f"dequant+cuBLAS {w.fmt:5s} {w.n:6d}x{w.k:<6d} T={t:<4d} {ms * 1e3:9.1f} us "
                  f"{tflops:7.1f} TFLOP/s")  # fmt: skip
            results.append({"fmt": w.fmt, "n": w.n, "k": w.k, "t": t, "us": ms * 1e3,
                            "tflops": tflops, "path": "dequant+cublas"})  # fmt: skip
            print(
                f"        cuBLAS fp16 {w.n}x{w.k} T={t}: {cublas_tflops(w.n, w.k, t):.1f} TFLOP/s"
            )
            continue
        default = pick_config(w.fmt, w.n, w.k, t, dev)
        best = time_point(w, t, [default])[0]
        _show(best, "default")
        results.append({**best, "default": True})
        if default.half2:  # the same launch with the fp32-decode GEMV, for comparison
            r = time_point(w, t, [replace(default, half2=False)])[0]
            _show(r, "fp32dec")
            results.append(r)
        if sweep:
            cfgs = [_sweep_config(c, w.fmt, w.n, w.k) for c in SWEEP[t]]
            for r in time_point(w, t, [c for c in cfgs if c != default]):
                _show(r, "sweep")
                results.append(r)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fmts", default=",".join(QTYPES))
    ap.add_argument("--sweep", default="", help="formats to sweep alternative configs for")
    ap.add_argument("--ts", default="1,16,512", help="token counts to time")
    ap.add_argument("--budget", type=float, default=1e9, help="stop after this many seconds")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), "triton", triton.__version__, "torch", torch.__version__)
    start, results = time.time(), []
    for fmt in args.fmts.split(","):
        shapes = SHAPES + ([LM_HEAD] if fmt == "q6_k" else [])
        for n, k in shapes:
            if time.time() - start > args.budget:
                print(f"budget reached, skipping {fmt} {n}x{k}")
                continue
            w = random_weight(fmt, n, k)
            ts = tuple(int(t) for t in args.ts.split(","))
            bench_weight(w, fmt in args.sweep.split(","), results, ts)
            del w
            torch.cuda.empty_cache()
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "bench_qlinear.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
