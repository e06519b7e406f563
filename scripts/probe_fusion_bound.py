"""Upper bound of fusing the small one-row kernels away: batch-1 decode with the RMSNorm and/or
SiLU x mul launches of one-row steps removed (their outputs are stale buffers, so the tokens
are garbage; only the speed means anything). What a fusion into the neighbouring GEMVs could
save at most, before spending the work on it.

  python3 scripts/probe_fusion_bound.py --skip norm,silu -- bench --model llama3-8b-q4_k_m \
      --scenario tg -p 0 -n 64 -r 3

--skip '' runs the unpatched engine (the baseline, same process setup). --unfused turns off
`linear_add_rms_norm`'s fused launch (projection + residual add + norm, pending scale), so the
A/B of that fusion runs the same way:

  python3 scripts/probe_fusion_bound.py --skip '' --unfused -- bench ...
"""

from __future__ import annotations

import argparse
import sys

import torch


def _cached(real, key_of):
    """A stand-in for a one-row kernel wrapper: the first call per shape runs the real kernel
    (eagerly, before graph capture) and every later one-row call returns those buffers."""
    memo: dict = {}

    def fake(*args, **kwargs):
        x = args[0]
        if x.dim() != 2 or x.shape[0] != 1:
            return real(*args, **kwargs)
        key = key_of(args, kwargs)
        if key not in memo:
            memo[key] = real(*args, **kwargs)
        return memo[key]

    return fake


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip", default="norm,silu", help="comma list of: norm, silu ('' = none)")
    ap.add_argument("--unfused", action="store_true",
                    help="compose qlinear + add_rms_norm instead of the fused launch")  # fmt: skip
    ap.add_argument("--fused-config", default="",
                    help="BN,WARPS of the fused launch (default: the dp4a GEMV's own config)")  # fmt: skip
    ap.add_argument("cli", nargs=argparse.REMAINDER, help="-- then `localllm` arguments")
    a = ap.parse_args()
    skip = {s for s in a.skip.split(",") if s}
    from localllm.kernels.fused import activation_triton, linear_norm_triton, norm_triton

    if a.unfused:
        linear_norm_triton._fused_config = lambda *args: None
    elif a.fused_config:
        import dataclasses

        bn, warps = (int(v) for v in a.fused_config.split(","))
        own = linear_norm_triton._fused_config

        def forced(x, w, *rest):
            cfg = own(x, w, *rest)
            if cfg is None:
                return None
            cfg = dataclasses.replace(cfg, bn=bn, warps=warps)
            return cfg if linear_norm_triton.norm_fusable(cfg, w.fmt, w.n, w.k) else None

        linear_norm_triton._fused_config = forced

    if "norm" in skip:
        real_add = norm_triton.add_rms_norm

        def add_key(args, kwargs):
            x, residual, weight = args[:3]
            return (x.shape, x.device, kwargs.get("quant", args[4] if len(args) > 4 else None))

        cached = _cached(real_add, add_key)

        def fake_add(x, residual, weight, eps, quant=None):
            if x.dim() != 2 or x.shape[0] != 1:
                return real_add(x, residual, weight, eps, quant=quant)
            out, _ = cached(x, residual, weight, eps, quant=quant)
            return out, residual  # no launch: the residual stream is left as it was

        norm_triton.add_rms_norm = fake_add
        linear_norm_triton.add_rms_norm = fake_add  # its composed path (with --unfused)
    if "silu" in skip:
        activation_triton.silu_mul = _cached(
            activation_triton.silu_mul,
            lambda args, kw: (args[0].shape, args[0].device, kw.get("quant")),
        )
    print(f"skipped one-row launches: {sorted(skip) or 'none'}; fused projection + norm: "
          f"{'off' if a.unfused else 'on ' + (a.fused_config or 'own config')}", flush=True)  # fmt: skip
    from localllm.cli import main as cli_main

    cli = a.cli[1:] if a.cli[:1] == ["--"] else a.cli
    torch.manual_seed(0)
    sys.exit(cli_main(cli))


if __name__ == "__main__":
    main()
