"""Session 39: for each shape and row count, the dispatch's config (step-ahead decode on from
AHEAD_MIN_ROWS rows) and the same tile without it, as JSON lines for `probe_qmm.py --configs`;
prints what `qmm_launch` fitted each to on this GPU (spill fallback) and the spills. It ran on
e3b6b49 with the dispatch asking `MMConfig.ahead` from 17 rows (the step-ahead decode, dropped
first where a program spilled); that dispatch was reverted after this call (BENCHMARKS.md,
session 39)."""

import json
import os
import sys
from dataclasses import replace

import torch

sys.path.insert(0, os.path.join(os.environ["LOCALLLM_REPO"], "scripts"))
from bench_qlinear import random_weight  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear import qmm_triton as mm  # noqa: E402
from localllm.kernels.quant import kernel_facts  # noqa: E402

SHAPES = [("q4_k", 6144, 4096), ("q4_k", 4096, 4096), ("q4_k", 28672, 4096),
          ("q4_k", 4096, 14336), ("q6_k", 4096, 14336), ("q6_k", 1024, 4096),
          ("q4_0", 12288, 4096), ("q4_0", 4096, 4096), ("q4_0", 22016, 4096),
          ("q4_0", 4096, 11008)]  # fmt: skip
p = device_props(torch.device("cuda"))
with open(sys.argv[1], "w") as f:
    for fmt, n, k in SHAPES:
        w = random_weight(fmt, n, k)
        planes = [w.tensors[q] for q in kernel_facts(fmt).planes]
        for t in (32, 64, 100, 128):
            cfg = mm.mm_config(fmt, n, k, t, p.sm_count, p.smem_per_block, p.arch)
            x = torch.randn(t, k, device="cuda").half()
            for c in (cfg, replace(cfg, ahead=False)):
                mm.qmm_launch(x, planes, fmt, n, None, c)
                fitted = mm._FITTED[(fmt, x.dtype, c)]
                spills = 4 * (mm._launch(x, planes, fmt, n, None, fitted)[1].n_spills or 0)
                print(f"{fmt} {n}x{k} T={t} asked ahead={c.ahead} -> {fitted} spills {spills} B")
            f.write(
                json.dumps(
                    {"fmt": fmt, "n": n, "k": k, "t": t, "cfg": replace(cfg, ahead=False).__dict__}
                )
                + "\n"
            )
