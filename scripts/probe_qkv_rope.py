"""Time the fused QKV + RoPE + KV-store launch of a decode token (`dp4a_rope_launch`) over
RoPE pairs per program, warps and groups per K step, beside the plain dp4a GEMV of the same
weights at the dispatch's config (what the fusion has to match). Weights read from memory
(copies cycled past the L2), CUDA-graph timing, one token; every config's output checked
against the engine's launch (`rope_config`).

    python3 scripts/probe_qkv_rope.py [--models llama2,llama3] [--pairs 1,2,4]
        [--warps 2,4] [--ngs 64,128]

Shapes: llama2-7b (Q4_0 q|k|v 12288x4096, 32 / 32 heads) and llama3-8b (Q4_K q|k 5120x4096
beside a Q6_K v 1024x4096, 32 / 8 heads), head_dim 128. Prints us and GB/s of the weights;
JSON lines to $OUT/probe_qkv_rope.jsonl.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import sys

import torch
from triton.testing import do_bench_cudagraph

sys.path.insert(0, os.path.dirname(__file__))
from bench_qlinear import cold_planes  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.fused.quant_act_triton import quant_act_triton  # noqa: E402
from localllm.kernels.linear import dp4a_triton as dp  # noqa: E402

# model -> (q heads, kv heads, [(fmt, rows) of each QKV weight])
MODELS = {
    "llama2": (32, 32, [("q4_0", 12288)]),
    "llama3": (32, 8, [("q4_k", 5120), ("q6_k", 1024)]),
}
K, D, BLOCK = 4096, 128, 16


class Probe:
    """One model's QKV weights (cold copies), a decode token's inputs and the outputs."""

    def __init__(self, name: str, out) -> None:  # noqa: ANN001
        self.name, self.out = name, out
        self.nq, self.nkv, self.shapes = MODELS[name]
        self.weights = [cold_planes(fmt, n, K) for fmt, n in self.shapes]
        self.copies = min(len(sets) for _, sets in self.weights)
        self.nbytes = sum(w.nbytes for w, _ in self.weights)
        x = torch.randn(1, K, device="cuda").half()
        self.xq, self.xs = quant_act_triton(x, "w4")
        self.pos = torch.tensor([777], device="cuda")
        i = torch.arange(D // 2, dtype=torch.float64)
        ang = torch.arange(1024, dtype=torch.float64)[:, None] / 1e4 ** (i / (D // 2))
        self.cs = torch.cat([ang.cos(), ang.sin()], -1).float().cuda()
        self.slot = torch.tensor([5 * BLOCK + 3], device="cuda")
        self.kc = torch.zeros(64, self.nkv, BLOCK, D, dtype=torch.float16, device="cuda")
        self.vc = torch.zeros_like(self.kc)
        self.qkv = torch.empty(1, (self.nq + 2 * self.nkv) * D, dtype=torch.float16, device="cuda")

    def fused(self, cfg: dp.RopeConfig, c: int) -> None:
        ws = [(fmt, n, sets[c]) for (fmt, n), (_, sets) in zip(self.shapes, self.weights)]
        dp.dp4a_rope_launch(self.xq, self.xs, ws, None, self.qkv, 0, self.nq, self.nkv, D,
                            self.pos, self.cs, True, self.kc, self.vc, self.slot, cfg)  # fmt: skip

    def gemv(self, i: int, cfg: dp.Dp4aConfig, c: int) -> None:
        (fmt, n), (_, sets) = self.shapes[i], self.weights[i]
        dp.dp4a_launch(self.xq, self.xs, sets[c], fmt, n, None, cfg, torch.float16)

    def timed(self, fn) -> float:  # noqa: ANN001
        """us per call of fn(copy), cycling through the weight copies."""

        def run() -> None:
            for c in range(self.copies):
                fn(c)

        return do_bench_cudagraph(run, rep=30) * 1e3 / self.copies

    def record(self, **rec: object) -> None:
        rec = dict(model=self.name, **rec)
        print(json.dumps(rec), flush=True)
        self.out.write(json.dumps(rec) + "\n")

    def run(self, grid, sms: int) -> None:  # noqa: ANN001
        plain = 0.0
        for i, ((fmt, n), (w, _)) in enumerate(zip(self.shapes, self.weights)):
            cfg = dp.dp4a_config(fmt, n, K, sms, 1)
            us = self.timed(functools.partial(self.gemv, i, cfg))
            plain += us
            self.record(kind="gemv", fmt=fmt, n=n, us=round(us, 2), gbs=round(w.nbytes / us / 1e3))
        self.record(kind="gemvs", us=round(plain, 2), gbs=round(self.nbytes / plain / 1e3))
        engine = dp.rope_config(self.shapes[0][0])
        self.fused(engine, 0)
        want = [t.clone() for t in (self.qkv, self.kc, self.vc)]
        for p, wp, ng in grid:
            cfg = dp.RopeConfig(p, wp, ng)
            try:
                self.fused(cfg, 0)
            except Exception as e:  # noqa: BLE001 (a config that does not compile: say so, go on)
                self.record(kind="fused", cfg=[p, wp, ng], error=str(e).splitlines()[0][:200])
                continue
            ok = all(torch.allclose(g.float(), h.float(), rtol=1e-3, atol=1e-3 * h.abs().max().item())
                     for g, h in zip((self.qkv, self.kc, self.vc), want))  # fmt: skip
            us = self.timed(functools.partial(self.fused, cfg))
            self.record(kind="fused", cfg=[p, wp, ng], engine=cfg == engine, ok=ok,
                        us=round(us, 2), gbs=round(self.nbytes / us / 1e3))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="llama2,llama3")
    ap.add_argument("--pairs", default="1,2,4")
    ap.add_argument("--warps", default="2,4")
    ap.add_argument("--ngs", default="64,128")
    a = ap.parse_args()
    sms = device_props(torch.device("cuda")).sm_count
    out = open(os.path.join(os.environ.get("OUT", "."), "probe_qkv_rope.jsonl"), "a")
    grid = list(itertools.product(*(map(int, s.split(",")) for s in (a.pairs, a.warps, a.ngs))))
    for name in a.models.split(","):
        Probe(name, out).run(grid, sms)


if __name__ == "__main__":
    main()
