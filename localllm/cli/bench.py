"""`localllm bench`: llama-bench-style pp/tg figures and batched decode, on any GGUF file or
on the synthetic benchmark models of ANCHORS.md (written once to the cache folder)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from localllm.bench.models import resolve_model
from localllm.bench.scenarios import (
    bench_itl,
    bench_parallel,
    bench_pp,
    bench_prefix_ttft,
    bench_tg,
    measure_bandwidth,
)
from localllm.bench.spec import BENCH_SPEC_TOKENS, compare, format_compare, prompt_set
from localllm.cli.args import HelpFormatter, add_engine_args, engine_config
from localllm.errors import LocalLLMError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="measure prefill/decode speed (llama-bench style)",
        formatter_class=HelpFormatter,
    )
    add_engine_args(p)
    p.add_argument("-p", "--n-prompt", type=int, default=512, help="prefill length (pp)")
    p.add_argument("-n", "--n-gen", type=int, default=128, help="decode length (tg)")
    p.add_argument("-r", "--reps", type=int, default=3, help="repetitions of pp and tg")
    p.add_argument("--parallel", type=str, default="", help="comma list of concurrent sequences")
    p.add_argument("--parallel-prompt", type=int, default=128, help="prompt tokens per sequence")
    p.add_argument("--parallel-gen", type=int, default=128, help="tokens generated per sequence")
    p.add_argument(
        "--profile",
        type=str,
        default="",
        help="comma list of batch sizes to profile per kernel category (CUDA)",
    )
    p.add_argument(
        "--prefix-test",
        action="store_true",
        help="TTFT of a 4000-token prompt whose first 3900 tokens are cached vs cold",
    )
    p.add_argument(
        "--itl-test",
        action="store_true",
        help="p99 inter-token latency of 8 streams while an 8000-token prompt prefills",
    )
    p.add_argument(
        "--spec",
        action="store_true",
        help="speculative decoding on vs off at batch 1 on input-grounded and open-ended "
        "prompts: speed, acceptance, mean accepted run (k: --spec-tokens, else "
        f"{BENCH_SPEC_TOKENS})",
    )
    p.add_argument(
        "--spec-prompts",
        default="auto",
        choices=["auto", "chat", "code", "story"],
        help="prompt set of --spec (auto: chat if the model has a chat template, else code)",
    )
    p.add_argument("--spec-gen", type=int, default=128, help="tokens per prompt of --spec")
    p.add_argument("--json", type=str, default=None, help="write results to this file")
    p.set_defaults(func=run)


def _engine(args: argparse.Namespace):
    from localllm.engine.engine import LLMEngine

    par = [int(x) for x in args.parallel.split(",") if x]
    cfg = engine_config(
        args,
        model=resolve_model(args.model),
        max_num_batched_tokens=max(args.max_num_batched_tokens, args.n_prompt),
        max_num_seqs=max([args.max_num_seqs, *par]),
        max_model_len=args.max_model_len or (8192 + 256 if args.itl_test else 4096 + 256),
        **({"spec_tokens": BENCH_SPEC_TOKENS} if args.spec and args.spec_tokens is None else {}),
    )
    if args.spec and cfg.spec_tokens == 0:
        raise LocalLLMError("--spec compares speculation on and off: give --spec-tokens >= 1")
    return LLMEngine(cfg)


def _speed(args: argparse.Namespace, engine, res: dict, bw: float) -> None:
    """pp, tg and the parallel decode figures."""
    weight_bytes = engine.runner.weight_bytes
    if args.n_prompt:
        res["pp"] = {"n": args.n_prompt, "tok_s": bench_pp(engine, args.n_prompt, args.reps)}
        print(f"pp{args.n_prompt}: {res['pp']['tok_s']:.1f} tok/s")
    if args.n_gen:
        tg = bench_tg(engine, args.n_gen, args.reps)
        ceiling = bw / weight_bytes if bw else 0.0
        res["tg"] = {
            "n": args.n_gen,
            "tok_s": tg,
            "ceiling_tok_s": ceiling,
            "fraction_of_ceiling": tg / ceiling if ceiling else None,
        }
        frac = (
            f" ({100 * tg / ceiling:.0f}% of the {ceiling:.0f} tok/s bandwidth ceiling)"
            if ceiling
            else ""
        )
        print(f"tg{args.n_gen}: {tg:.1f} tok/s{frac}")
    res["parallel"] = []
    for n in [int(x) for x in args.parallel.split(",") if x]:
        out = bench_parallel(engine, n, args.parallel_prompt, args.parallel_gen)
        res["parallel"].append(out)
        print(
            f"parallel {n}: {out['decode_tok_s']:.0f} generated tok/s in decode, "
            f"{out['e2e_tok_s']:.0f} end to end"
        )


def _latency(args: argparse.Namespace, engine, res: dict) -> None:
    """The per-kernel profile, prefix-cache TTFT and inter-token latency tests."""
    for b in [int(x) for x in args.profile.split(",") if x]:
        from localllm.bench.profile import format_profile, profile_decode

        prof = profile_decode(engine, b)
        res.setdefault("profile", []).append(prof)
        print(format_profile(prof))
    if args.prefix_test:
        res["prefix"] = bench_prefix_ttft(engine)
        p = res["prefix"]
        print(
            f"prefix cache: 4000-token prompt TTFT cold {p['cold_ms']:.1f} ms, with 3900 cached "
            f"{p['warm_ms']:.1f} ms ({100 * p['ratio']:.1f}% of cold)"
        )
    if args.spec:
        k, prompts = engine.spec_tokens, prompt_set(engine, args.spec_prompts)
        by_kind = compare(engine, prompts, args.spec_gen, k)
        res["spec"] = {"k": k, "gen": args.spec_gen, "by_kind": by_kind}
        print("\n".join(format_compare(k, args.spec_gen, res["spec"]["by_kind"])))
    if args.itl_test:
        res["itl"] = bench_itl(engine)
        i = res["itl"]
        print(
            f"inter-token latency of 8 streams: p99 {i['unloaded_p99_ms']:.2f} ms unloaded, "
            f"{i['loaded_p99_ms']:.2f} ms while an 8000-token prompt prefills "
            f"({i['loaded_p99_ms'] / i['unloaded_p99_ms']:.2f}x)"
        )


def run(args: argparse.Namespace) -> int:
    from localllm.device import device_name

    engine = _engine(args)
    r = engine.runner
    bw = measure_bandwidth()
    res: dict = {
        "model": args.model,
        "file": engine.cfg.model,
        "device": device_name(r.device),
        "kv_dtype": r.kv_dtype,
        "weight_bytes": r.weight_bytes,
        "copy_bandwidth_GBps": bw / 1e9,
    }
    _speed(args, engine, res, bw)
    _latency(args, engine, res)
    print(
        f"[{res['device']}, weights {r.weight_bytes / 1e9:.2f} GB read per token, "
        f"copy bandwidth {bw / 1e12:.2f} TB/s, kv {r.kv_dtype}]"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0
