"""Sweep MODE_STORE (dequantize to fp16, the prefill path) and MODE_DOT T=32/64 configs on
real shapes; prints the time of each so the heuristic table can be set from measurements.
Usage: python3 scripts/sweep_dequant.py [--store-only]"""

from __future__ import annotations

import itertools
import sys
from functools import partial
from pathlib import Path

import torch
import triton
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).parent))
from bench_qlinear import random_weight  # noqa: E402

from localllm.kernels.linear.qlinear_triton import (  # noqa: E402
    MODE_DOT,
    MODE_STORE,
    QLinearConfig,
    _launch,
    group_size,
    pick_config,
    qlinear_launch,
    store_config,
)


def store_time(w, cfg) -> float:
    out = torch.empty((w.n, w.k), device="cuda", dtype=torch.float16)
    return do_bench(lambda: _launch(out, out, None, w, cfg, 1), warmup=5, rep=30)


def main() -> None:
    store_only = "--store-only" in sys.argv
    for fmt, (n, k) in [("q4_k", (28672, 4096)), ("q6_k", (4096, 14336)), ("q4_0", (22016, 4096))]:
        w = random_weight(fmt, n, k)
        gbytes = (w.nbytes + n * k * 2) / 1e9
        res = []
        for bn, tile_g, warps in itertools.product((8, 16, 32, 64), (4, 8, 16, 32), (2, 4, 8)):
            tile = group_size(fmt) * tile_g
            if tile > k:
                continue
            for split in sorted({triton.cdiv(k, tile), max(1, triton.cdiv(k, tile) // 4), 1}):
                cfg = QLinearConfig(MODE_STORE, 1, bn, tile, split=split, warps=warps)
                try:
                    ms = store_time(w, cfg)
                except Exception as e:  # noqa: BLE001 - a config may not compile
                    print("skip", cfg, type(e).__name__)
                    continue
                res.append((ms, cfg))
        res.sort(key=lambda r: r[0])
        for ms, cfg in res[:5]:
            print(f"STORE {fmt} {n}x{k}: {ms * 1e3:8.1f} us {gbytes / ms:7.1f} GB/s  {cfg}")
        default = store_config(fmt, k)
        ms = store_time(w, default)
        print(f"STORE default {fmt} {n}x{k}: {ms * 1e3:8.1f} us {gbytes / ms:7.1f} GB/s  {default}")
        for t in () if store_only else (32, 64):
            x = torch.randn(t, k, device="cuda").half()
            dres = []
            for bn, tile_g, warps in itertools.product((32, 64, 128), (4, 8), (4, 8)):
                cfg = QLinearConfig(MODE_DOT, t, bn, group_size(fmt) * tile_g, warps=warps)
                try:
                    ms = do_bench(partial(qlinear_launch, x, w, None, cfg), warmup=5, rep=30)
                except Exception as e:  # noqa: BLE001
                    print("skip", cfg, type(e).__name__)
                    continue
                dres.append((ms, cfg))
            dres.sort(key=lambda r: r[0])
            default = pick_config(fmt, n, k, t, torch.device("cuda"))
            dms = do_bench(partial(qlinear_launch, x, w, None, default), warmup=5, rep=30)
            print(
                f"DOT default {fmt} T={t}: {dms * 1e3:8.1f} us {w.nbytes / 1e6 / dms:7.1f} GB/s {default}"
            )
            for ms, cfg in dres[:3]:
                print(
                    f"DOT {fmt} {n}x{k} T={t}: {ms * 1e3:8.1f} us {w.nbytes / 1e6 / ms:7.1f} GB/s  {cfg}"
                )


if __name__ == "__main__":
    main()
