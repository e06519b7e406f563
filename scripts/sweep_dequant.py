"""Sweep the prefill dequantization (`kernels/linear/dequant_triton.py`) on the weight shapes of
the benchmark models: every (BN, NG, warps, stages) at the default split, then the split
for the best few; prints each shape's best configs, the default's time and its share of the
copy ceiling (packed bytes read + fp16 bytes written), so `dequant_config` can be set from
measurements. CUDA-graph timing (no launch overhead).

Usage: python3 scripts/sweep_dequant.py [--json OUT.jsonl] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

import torch
from triton.testing import do_bench_cudagraph

sys.path.insert(0, str(Path(__file__).parent))
from bench_qlinear import PEAK_BW, random_weight  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear.dequant_triton import (  # noqa: E402
    DequantConfig,
    dequant_config,
    dequant_launch,
    dequant_split,
)

SHAPES = {  # format -> (N, K) of llama3-8b-q4_k_m / llama2-7b-q4_0 weights
    "q4_k": [(28672, 4096), (4096, 4096)],
    "q6_k": [(4096, 14336)],
    "q4_0": [(22016, 4096), (4096, 11008)],
    "q8_0": [(4096, 4096)],
}


def timed(w, cfg: DequantConfig, out: torch.Tensor) -> float:
    """Microseconds per launch."""
    return 1e3 * do_bench_cudagraph(lambda: dequant_launch(w, torch.float16, cfg, out), rep=40)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="append every measurement to this .jsonl")
    ap.add_argument("--quick", action="store_true", help="only the default configs")
    a = ap.parse_args()
    sms = device_props(torch.device("cuda")).sm_count
    log = open(a.json, "a") if a.json else None
    for fmt, shapes in SHAPES.items():
        for n, k in shapes:
            w = random_weight(fmt, n, k)
            out = torch.empty((n, k), device="cuda", dtype=torch.float16)
            gb = (w.nbytes + n * k * 2) / 1e9
            default = dequant_config(fmt, n, k, sms)
            us = timed(w, default, out)
            print(f"DEFAULT {fmt} {n}x{k}: {us:8.1f} us {gb / us * 1e6:7.0f} GB/s "
                  f"({100 * gb / us * 1e6 / PEAK_BW:.0f}% of copy) {default}", flush=True)  # fmt: skip
            if a.quick:
                continue
            res = []
            for bn, ng, warps, stages in itertools.product(
                (16, 32, 64), (8, 16), (4, 8), (1, 2, 3)
            ):
                split = dequant_split(fmt, n, k, sms, bn, ng)
                cfg = DequantConfig(bn, ng, split, warps, stages)
                try:
                    res.append((timed(w, cfg, out), cfg))
                except Exception as e:  # noqa: BLE001 - a config may not compile or fit
                    print("skip", cfg, type(e).__name__)
            res.sort(key=lambda r: r[0])
            for _, cfg in res[:3]:  # then the split of the best few
                for split in sorted({1, 2, 4, 8, 16, 32} - {cfg.split}):
                    try:
                        res.append(
                            (timed(w, replace(cfg, split=split), out), replace(cfg, split=split))
                        )
                    except Exception:  # noqa: BLE001, S112
                        continue
            res.sort(key=lambda r: r[0])
            for us_b, cfg in res[:5]:
                print(
                    f"BEST {fmt} {n}x{k}: {us_b:8.1f} us {gb / us_b * 1e6:7.0f} GB/s {cfg}",
                    flush=True,
                )
            if log:
                for us_b, cfg in res:
                    log.write(json.dumps(dict(fmt=fmt, n=n, k=k, us=us_b, **asdict(cfg))) + "\n")
                log.write(
                    json.dumps(dict(fmt=fmt, n=n, k=k, us=us, default=True, **asdict(default)))
                    + "\n"
                )
    if log:
        log.close()


if __name__ == "__main__":
    main()
