"""Upper bound of fusing the small one-row kernels away: batch-1 decode with the RMSNorm and/or
SiLU x mul launches of one-row steps removed (their outputs are stale buffers, so the tokens
are garbage; only the speed means anything). What a fusion into the neighbouring GEMVs could
save at most, before spending the work on it.

  python3 scripts/probe_fusion_bound.py --skip norm,silu -- bench --model llama3-8b-q4_k_m \
      --scenario tg -p 0 -n 64 -r 3

--skip '' runs the unpatched engine (the baseline, same process setup).
Session 11 (H200, BENCHMARKS.md): without the norms llama3-8b-q4_k_m decodes 6.8% faster and
llama2-7b-q4_0 8.2%; without SiLU x mul 2% / 0%. Session 35 (H200, tg128): without the norms
+5.7% / +8.7% at depth 0, +5.5% / +5.3% at 4,096 tokens; its column-scale fusion
(benchmarks/session35/norm_fusion.patch) lost 1.4-5.9% instead. A fusion that reached for it (the O and down
GEMVs adding the residual and quantizing r * weight per group in the last program of each
group, the norm's factor applied by the next GEMV) measured 0.7% slower, 0.1-0.6% without PDL.
"""

from __future__ import annotations

import argparse
import sys

import torch


def _cached(real):
    """A stand-in for a one-row kernel wrapper: the first call per (shape, device, quant) runs
    the real kernel (eagerly, before graph capture) and every later one-row call returns those
    buffers."""
    memo: dict = {}

    def fake(*args, **kwargs):
        x = args[0]
        if x.dim() != 2 or x.shape[0] != 1:
            return real(*args, **kwargs)
        key = (x.shape, x.device, kwargs.get("quant"))
        if key not in memo:
            memo[key] = real(*args, **kwargs)
        return memo[key]

    return fake


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip", default="norm,silu", help="comma list of: norm, silu ('' = none)")
    ap.add_argument("cli", nargs=argparse.REMAINDER, help="-- then `localllm` arguments")
    a = ap.parse_args()
    skip = {s for s in a.skip.split(",") if s}
    from localllm.kernels.fused import activation_triton, norm_triton

    if "norm" in skip:
        real_add = norm_triton.add_rms_norm
        cached = _cached(real_add)

        def fake_add(x, residual, weight, eps, quant=None):
            if x.dim() != 2 or x.shape[0] != 1:
                return real_add(x, residual, weight, eps, quant=quant)
            out, _ = cached(x, residual, weight, eps, quant=quant)
            return out, residual  # no launch: the residual stream is left as it was

        norm_triton.add_rms_norm = fake_add
    if "silu" in skip:
        activation_triton.silu_mul = _cached(activation_triton.silu_mul)
    print(f"skipped one-row launches: {sorted(skip) or 'none'}", flush=True)
    from localllm.cli import main as cli_main

    cli = a.cli[1:] if a.cli[:1] == ["--"] else a.cli
    torch.manual_seed(0)
    sys.exit(cli_main(cli))


if __name__ == "__main__":
    main()
