"""Time the fused dequant-GEMM (`kernels/linear/qmm_triton.py`) on sm_90 with the MMA
instruction Triton picks for it: wgmma (MMAv3, the default) or, with DISABLE_MMA_V3=1 in the
environment, the Ampere `mma.sync` (MMAv2, what sm_86 / sm_89 always run). The environment
variable is read when a kernel compiles, so one process times one MMA version; run it twice.

    python3 scripts/probe_mma_version.py --tag v3 --ts 32,64 --only-heuristic
    DISABLE_MMA_V3=1 python3 scripts/probe_mma_version.py --tag v2 --ts 32,64 --warm 15

Each config is launched exactly as given (`qmm_triton._launch`: no spill guard, no fitting),
weights read from memory (enough copies to overflow L2), CUDA-graph timing. Appends JSON lines
(tag, fmt, n, k, t, us, err against the heuristic's output, cfg) to $OUT/probe_mma_version.jsonl
and prints the best config per shape."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from dataclasses import replace

import torch
from triton.testing import do_bench_cudagraph

sys.path.insert(0, os.path.dirname(__file__))
from bench_qlinear import PEAK_BW  # noqa: E402
from probe_qmm import SHAPES, cold_copies  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear import qmm_triton as mm  # noqa: E402


def variants(cfg: mm.MMConfig, t: int, only_heuristic: bool) -> list[mm.MMConfig]:
    """The heuristic's config, then the tiles around it: operand order, weight rows, warps,
    stages (the split, groups per step and scale prefetch stay the heuristic's)."""
    out = [cfg]
    if not only_heuristic:
        for swap, bn, warps, stages in itertools.product((False, True), (64, 128), (4, 8),
                                                         (2, 3)):  # fmt: skip
            out.append(replace(cfg, bm=min(max(t, 16), 64), swap=swap, bn=bn, warps=warps,
                               stages=stages))  # fmt: skip
    seen: set = set()
    return [c for c in out if not (c in seen or seen.add(c))]


def jobs(ts: list[int], fmts: list[str], only_heuristic: bool) -> list[tuple]:
    props = device_props(torch.device("cuda"))
    out = []
    for fmt in fmts:
        for n, k in SHAPES[fmt]:
            for t in ts:
                heur = mm.mm_config(fmt, n, k, t, props.sm_count, props.smem_per_block, props.arch)
                out += [(fmt, n, k, t, c) for c in variants(heur, t, only_heuristic)]
    return out


def _compile(share: list[tuple]) -> int:
    """Launch each config once (Triton's disk cache keeps the build for the timing process)."""
    from probe_qmm import random_weight  # noqa: PLC0415 - in the worker

    from localllm.kernels.quant import kernel_facts  # noqa: PLC0415

    done, weights = 0, {}
    for fmt, n, k, t, cfg in share:
        if (fmt, n, k) not in weights:
            w = random_weight(fmt, n, k)
            weights[(fmt, n, k)] = [w.tensors[p] for p in kernel_facts(fmt).planes]
        try:
            mm._launch(torch.randn(t, k, device="cuda").half(), weights[(fmt, n, k)], fmt, n,
                       None, cfg)  # fmt: skip
            done += 1
        except Exception:  # noqa: BLE001, S112 - the timing pass reports it
            continue
    torch.cuda.synchronize()
    return done


def time_us(x: torch.Tensor, copies: list, fmt: str, n: int, cfg: mm.MMConfig) -> float:
    """us per launch of `cfg` exactly (no spill guard), cycling through the weight copies."""

    def run() -> None:
        for planes in copies:
            mm._launch(x, planes, fmt, n, None, cfg)

    return do_bench_cudagraph(run, rep=30) * 1e3 / len(copies)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", required=True)
    ap.add_argument("--ts", default="32,64")
    ap.add_argument("--fmts", default="q4_k,q6_k,q4_0")
    ap.add_argument("--only-heuristic", action="store_true")
    ap.add_argument("--warm", type=int, default=0, help="compile in N processes first")
    a = ap.parse_args()
    ts = [int(v) for v in a.ts.split(",")]
    todo = jobs(ts, a.fmts.split(","), a.only_heuristic)
    if a.warm > 1:
        import multiprocessing

        shares = [todo[i :: a.warm] for i in range(a.warm)]
        with multiprocessing.get_context("spawn").Pool(a.warm) as pool:
            print(f"compiled {sum(pool.map(_compile, shares))} of {len(todo)}", flush=True)
    path = os.path.join(os.environ.get("OUT", "."), "probe_mma_version.jsonl")
    by_shape: dict = {}
    for fmt, n, k, t, cfg in todo:
        by_shape.setdefault((fmt, n, k), {}).setdefault(t, []).append(cfg)
    for (fmt, n, k), per_t in by_shape.items():
        w, copies = cold_copies(fmt, n, k)
        for t, cfgs in per_t.items():
            x = torch.randn(t, k, device="cuda").half()
            ref = None
            res = []
            for c in cfgs:
                try:
                    o = mm._launch(x, copies[0], fmt, n, None, c)[0].float()
                    ref = o if ref is None else ref
                    err = ((o - ref).abs().max() / ref.abs().max()).item()

                    us = time_us(x, copies, fmt, n, c)
                except Exception as e:  # noqa: BLE001 - configs that do not compile or fit
                    print(f"   {c}: {type(e).__name__}", flush=True)
                    continue
                res.append((us, c, err))
                with open(path, "a") as f:
                    f.write(json.dumps({"tag": a.tag, "fmt": fmt, "n": n, "k": k, "t": t,
                                        "us": us, "err": err, "cfg": c.__dict__,
                                        "heuristic": c == cfgs[0]}) + "\n")  # fmt: skip
            if not res:
                continue
            best = min(res, key=lambda r: r[0])
            print(f"{a.tag} {fmt} {n}x{k} T={t}: heuristic {res[0][0]:.1f} us, best "
                  f"{best[0]:.1f} us ({w.nbytes / best[0] / 1e3 / PEAK_BW * 1e9:.0%}) "
                  f"{best[1]} err {best[2]:.0e}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
