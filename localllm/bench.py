"""`localllm bench`: llama-bench-style pp/tg figures and batched decode, on any GGUF file or
on the synthetic benchmark models of ANCHORS.md (written once to the cache folder)."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from localllm.cli_args import add_engine_args, engine_config
from localllm.core import SamplingParams


def cache_dir() -> Path:
    base = os.environ.get("LOCALLLM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "localllm"
    )
    return Path(base) / "bench"


def resolve_model(name: str) -> str:
    """A path, or the name of a synthetic model (written on first use)."""
    from localllm.formats.synthetic import SPECS, write_synthetic

    if name not in SPECS:
        return name
    path = cache_dir() / f"{name}.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"writing synthetic model {name} to {path} ...", file=sys.stderr)
        write_synthetic(SPECS[name], path, vocab_gguf=_spm_vocab())
    return str(path)


def _spm_vocab() -> str | None:
    """The Llama SentencePiece vocab ANCHORS.md asks for, when the test data is around."""
    for base in (
        os.environ.get("LOCALLLM_TESTDATA"),
        Path(__file__).resolve().parents[1] / ".." / "shared" / "testdata",
    ):
        if base and (p := Path(base) / "vocab" / "ggml-vocab-llama-spm.gguf").exists():
            return str(p)
    return None


def measure_bandwidth() -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write), the decode ceiling's base."""
    import torch

    if not torch.cuda.is_available():
        return 0.0
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    reps = 20
    for _ in range(reps):
        b.copy_(a)
    torch.cuda.synchronize()
    return 2 * n * reps / (time.perf_counter() - t0)


def _run(engine, prompts: list[list[int]], gen: int) -> tuple[float, float, int]:
    """Returns (seconds to first token of the last request, total seconds, generated tokens)."""
    params = SamplingParams(max_tokens=gen, temperature=0.0, ignore_eos=True)
    ids = [engine.add_request(p, params) for p in prompts]
    remaining = set(ids)
    t0 = time.perf_counter()
    first = {}
    n = 0
    while remaining:
        for ev in engine.step():
            if ev.token_ids and ev.request_id not in first:
                first[ev.request_id] = time.perf_counter()
            n += len(ev.token_ids)
            if ev.finished:
                remaining.discard(ev.request_id)
    t1 = time.perf_counter()
    return max(first.values()) - t0, t1 - t0, n


def _rand_prompt(rng: random.Random, vocab: int, n: int, bos: int | None) -> list[int]:
    ids = [rng.randrange(3, vocab) for _ in range(n)]
    return ([bos] + ids[:-1]) if bos is not None else ids


def bench_pp(engine, n: int, reps: int) -> float:
    rng = random.Random(0)
    V, bos = engine.model_cfg.vocab_size, engine.tokenizer.bos_id
    _run(engine, [_rand_prompt(rng, V, n, bos)], 1)  # warm-up (compiles kernels)
    times = [_run(engine, [_rand_prompt(rng, V, n, bos)], 1)[0] for _ in range(reps)]
    return n / (sum(times) / len(times))


def bench_tg(engine, n: int, reps: int) -> float:
    bos = engine.tokenizer.bos_id if engine.tokenizer.bos_id is not None else 1
    _run(engine, [[bos]], 16)
    rates = []
    for _ in range(reps):
        ttft, total, got = _run(engine, [[bos]], n + 1)
        rates.append((got - 1) / (total - ttft))
    return sum(rates) / len(rates)


def bench_parallel(engine, seqs: int, prompt: int, gen: int) -> dict:
    # prompts no earlier run has seen (no prefix-cache hits), so the warm-up's prefill steps
    # have the shapes of the timed one's
    rng = random.Random(1000 + seqs)
    V, bos = engine.model_cfg.vocab_size, engine.tokenizer.bos_id
    _run(engine, [_rand_prompt(rng, V, prompt, bos) for _ in range(seqs)], 4)
    ttft, total, got = _run(engine, [_rand_prompt(rng, V, prompt, bos) for _ in range(seqs)], gen)
    return {
        "parallel": seqs,
        "prompt": prompt,
        "gen": gen,
        "generated": got,
        "total_s": total,
        "e2e_tok_s": got / total,
        "decode_tok_s": (got - seqs) / (total - ttft),
    }


def _ttft(engine, prompt: list[int]) -> float:
    return _run(engine, [prompt], 1)[0]


def bench_prefix_ttft(engine) -> dict:
    """TTFT of a 4000-token prompt: cold, then with its first 3900 tokens in the prefix cache."""
    rng = random.Random(7)
    V, bos = engine.model_cfg.vocab_size, engine.tokenizer.bos_id
    _ttft(engine, _rand_prompt(rng, V, 4000, bos))  # warm-up
    cold = _ttft(engine, _rand_prompt(rng, V, 4000, bos))
    base = _rand_prompt(rng, V, 3900, bos)
    _ttft(engine, base)  # fills the cache with the 3900-token prefix
    warm = _ttft(engine, base + [rng.randrange(3, V) for _ in range(100)])
    return {"cold_ms": 1000 * cold, "warm_ms": 1000 * warm, "ratio": warm / cold}


def _step_gaps(engine, ids: set[str], steps: int) -> list[float]:
    gaps, last = [], time.perf_counter()
    for _ in range(steps):
        evs = engine.step()
        now = time.perf_counter()
        if any(ev.request_id in ids and ev.token_ids for ev in evs):
            gaps.append(now - last)
            last = now
    return gaps


def bench_itl(engine) -> dict:
    """p99 gap between tokens of 8 running streams, unloaded and while 8000 tokens prefill."""
    rng = random.Random(11)
    V, bos = engine.model_cfg.vocab_size, engine.tokenizer.bos_id
    params = SamplingParams(max_tokens=3000, temperature=0.0, ignore_eos=True)
    ids = {engine.add_request(_rand_prompt(rng, V, 128, bos), params) for _ in range(8)}
    _step_gaps(engine, ids, 20)
    unloaded = sorted(_step_gaps(engine, ids, 100))
    long_id = engine.add_request(
        _rand_prompt(rng, V, 8000, bos), SamplingParams(max_tokens=1, ignore_eos=True)
    )
    loaded = []
    while long_id in engine.requests:
        loaded += _step_gaps(engine, ids, 1)
    for rid in ids:
        engine.abort(rid)
    p99 = lambda xs: sorted(xs)[max(0, int(0.99 * len(xs)) - 1)]
    return {
        "unloaded_p99_ms": 1000 * p99(unloaded),
        "loaded_p99_ms": 1000 * p99(loaded),
        "loaded_steps": len(loaded),
    }


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure prefill/decode speed (llama-bench style)")
    add_engine_args(p)
    p.add_argument("-p", "--n-prompt", type=int, default=512, help="prefill length (pp)")
    p.add_argument("-n", "--n-gen", type=int, default=128, help="decode length (tg)")
    p.add_argument("-r", "--reps", type=int, default=3)
    p.add_argument("--parallel", type=str, default="", help="comma list of concurrent sequences")
    p.add_argument("--parallel-prompt", type=int, default=128)
    p.add_argument("--parallel-gen", type=int, default=128)
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
    p.add_argument("--json", type=str, default=None, help="write results to this file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from localllm.device import device_name
    from localllm.engine import LLMEngine

    model = resolve_model(args.model)
    par = [int(x) for x in args.parallel.split(",") if x]
    cfg = engine_config(
        args,
        model=model,
        max_num_batched_tokens=max(args.max_num_batched_tokens, args.n_prompt),
        max_num_seqs=max([args.max_num_seqs, *par]),
        max_model_len=args.max_model_len or (8192 + 256 if args.itl_test else 4096 + 256),
    )
    engine = LLMEngine(cfg)
    r = engine.runner
    bw = measure_bandwidth()
    res: dict = {
        "model": args.model,
        "file": model,
        "device": device_name(r.device),
        "kv_dtype": r.kv_dtype,
        "weight_bytes": r.weight_bytes,
        "copy_bandwidth_GBps": bw / 1e9,
    }
    if args.n_prompt:
        res["pp"] = {"n": args.n_prompt, "tok_s": bench_pp(engine, args.n_prompt, args.reps)}
        print(f"pp{args.n_prompt}: {res['pp']['tok_s']:.1f} tok/s")
    if args.n_gen:
        tg = bench_tg(engine, args.n_gen, args.reps)
        ceiling = bw / r.weight_bytes if bw else 0.0
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
    for n in par:
        out = bench_parallel(engine, n, args.parallel_prompt, args.parallel_gen)
        res["parallel"].append(out)
        print(
            f"parallel {n}: {out['decode_tok_s']:.0f} generated tok/s in decode, "
            f"{out['e2e_tok_s']:.0f} end to end"
        )
    for b in [int(x) for x in args.profile.split(",") if x]:
        from localllm.bench_profile import format_profile, profile_decode

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
    if args.itl_test:
        res["itl"] = bench_itl(engine)
        i = res["itl"]
        print(
            f"inter-token latency of 8 streams: p99 {i['unloaded_p99_ms']:.2f} ms unloaded, "
            f"{i['loaded_p99_ms']:.2f} ms while an 8000-token prompt prefills "
            f"({i['loaded_p99_ms'] / i['unloaded_p99_ms']:.2f}x)"
        )
    print(
        f"[{res['device']}, weights {r.weight_bytes / 1e9:.2f} GB read per token, "
        f"copy bandwidth {bw / 1e12:.2f} TB/s, kv {r.kv_dtype}]"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0
