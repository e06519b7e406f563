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
    for base in (os.environ.get("LOCALLLM_TESTDATA"), Path(__file__).resolve().parents[1] / ".." / "shared" / "testdata"):
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
    rng = random.Random(1)
    V, bos = engine.model_cfg.vocab_size, engine.tokenizer.bos_id
    _run(engine, [_rand_prompt(rng, V, prompt, bos) for _ in range(seqs)], 4)
    ttft, total, got = _run(engine, [_rand_prompt(rng, V, prompt, bos) for _ in range(seqs)], gen)
    return {"parallel": seqs, "prompt": prompt, "gen": gen, "generated": got,
            "total_s": total, "e2e_tok_s": got / total, "decode_tok_s": (got - seqs) / (total - ttft)}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure prefill/decode speed (llama-bench style)")
    add_engine_args(p)
    p.add_argument("-p", "--n-prompt", type=int, default=512, help="prefill length (pp)")
    p.add_argument("-n", "--n-gen", type=int, default=128, help="decode length (tg)")
    p.add_argument("-r", "--reps", type=int, default=3)
    p.add_argument("--parallel", type=str, default="", help="comma list of concurrent sequences")
    p.add_argument("--parallel-prompt", type=int, default=128)
    p.add_argument("--parallel-gen", type=int, default=128)
    p.add_argument("--json", type=str, default=None, help="write results to this file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from localllm.device import device_name
    from localllm.engine import LLMEngine

    model = resolve_model(args.model)
    par = [int(x) for x in args.parallel.split(",") if x]
    cfg = engine_config(
        args, model=model, enable_prefix_caching=False,
        max_num_batched_tokens=max(args.max_num_batched_tokens, args.n_prompt),
        max_num_seqs=max([args.max_num_seqs, *par]),
        max_model_len=args.max_model_len or 4096,
    )
    engine = LLMEngine(cfg)
    r = engine.runner
    bw = measure_bandwidth()
    res: dict = {"model": args.model, "file": model, "device": device_name(r.device),
                 "kv_dtype": r.kv_dtype, "weight_bytes": r.weight_bytes,
                 "copy_bandwidth_GBps": bw / 1e9}
    if args.n_prompt:
        res["pp"] = {"n": args.n_prompt, "tok_s": bench_pp(engine, args.n_prompt, args.reps)}
        print(f"pp{args.n_prompt}: {res['pp']['tok_s']:.1f} tok/s")
    if args.n_gen:
        tg = bench_tg(engine, args.n_gen, args.reps)
        ceiling = bw / r.weight_bytes if bw else 0.0
        res["tg"] = {"n": args.n_gen, "tok_s": tg, "ceiling_tok_s": ceiling,
                     "fraction_of_ceiling": tg / ceiling if ceiling else None}
        frac = f" ({100 * tg / ceiling:.0f}% of the {ceiling:.0f} tok/s bandwidth ceiling)" if ceiling else ""
        print(f"tg{args.n_gen}: {tg:.1f} tok/s{frac}")
    res["parallel"] = []
    for n in par:
        out = bench_parallel(engine, n, args.parallel_prompt, args.parallel_gen)
        res["parallel"].append(out)
        print(f"parallel {n}: {out['decode_tok_s']:.0f} generated tok/s in decode, "
              f"{out['e2e_tok_s']:.0f} end to end")
    print(f"[{res['device']}, weights {r.weight_bytes / 1e9:.2f} GB read per token, "
          f"copy bandwidth {bw / 1e12:.2f} TB/s, kv {r.kv_dtype}]")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0
