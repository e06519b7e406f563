"""Decode speed with a JSON schema active vs unconstrained (issue 18: within 10%).

For each batch size, the same prompts decode `--gen` tokens three ways: greedy without a
constraint (the engine's fastest path: argmax inside the CUDA graph), sampled without a
constraint (temperature 0.7: the sampler runs), and greedy under a JSON schema (masks filled
on the CPU while the forward runs, applied on the device with the masked argmax joining the
greedy ids: the sampler does not run). The synthetic
model's random weights write long JSON strings, so constrained sequences decode as long as
free ones. Also reports llguidance's CPU time per masked token.

    python3 scripts/bench_guided.py [--model llama3-8b-q4_k_m] [--batch 1,16] [--gen 128]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localllm.bench.models import resolve_model  # noqa: E402
from localllm.config import EngineConfig  # noqa: E402
from localllm.core import SamplingParams  # noqa: E402
from localllm.engine.engine import LLMEngine  # noqa: E402
from localllm.structured.spec import ConstraintSpec  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["title", "notes"],
    "additionalProperties": False,
}
MODES = {
    "greedy": lambda gen: SamplingParams(max_tokens=gen, temperature=0.0, ignore_eos=True),
    "sampled": lambda gen: SamplingParams(max_tokens=gen, temperature=0.7, seed=1, ignore_eos=True),
    "json_schema": lambda gen: SamplingParams(
        max_tokens=gen,
        temperature=0.0,
        ignore_eos=True,
        constraint=ConstraintSpec.json_schema(SCHEMA),
    ),
}


def decode_rate(eng: LLMEngine, prompts: list[list[int]], params: SamplingParams) -> dict:
    """Decode tokens/s after every sequence has its first token (as `bench --parallel`)."""
    ids = {eng.add_request(p, params) for p in prompts}
    t0 = time.perf_counter()
    first: dict[str, float] = {}
    n = 0
    while ids:
        for ev in eng.step():
            if ev.token_ids and ev.request_id not in first:
                first[ev.request_id] = time.perf_counter()
            n += len(ev.token_ids)
            if ev.finished:
                ids.discard(ev.request_id)
    total = time.perf_counter() - t0
    ttft = max(first.values()) - t0
    return {"generated": n, "decode_tok_s": (n - len(prompts)) / (total - ttft)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama3-8b-q4_k_m")
    ap.add_argument("--batch", default="1,16")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    eng = LLMEngine(EngineConfig(model=resolve_model(args.model), spec_tokens=0))  # plain decode
    rng = random.Random(0)
    vocab = eng.tokenizer.vocab_size
    eng.guided.compile(ConstraintSpec.json_schema(SCHEMA))  # the one-time tokenizer set-up
    results = []
    for batch in (int(b) for b in args.batch.split(",")):
        for mode, make in MODES.items():
            runs = []
            for rep in range(args.reps + 1):  # the first run warms up (kernels, graphs)
                prompts = [
                    [rng.randrange(3, vocab) for _ in range(args.prompt)] for _ in range(batch)
                ]
                r = decode_rate(eng, prompts, make(args.gen))
                if rep:
                    runs.append(r["decode_tok_s"])
            row = {"batch": batch, "mode": mode, "decode_tok_s": sum(runs) / len(runs)}
            results.append(row)
            print(json.dumps(row), flush=True)
    base = {r["batch"]: r["decode_tok_s"] for r in results if r["mode"] == "greedy"}
    print("\nbatch  mode          decode tok/s  vs greedy")
    for r in results:
        print(
            f"{r['batch']:>5}  {r['mode']:<12}  {r['decode_tok_s']:>12.1f}  "
            f"{r['decode_tok_s'] / base[r['batch']]:>8.1%}"
        )
    print(f"llguidance CPU time per masked token: {eng.guided.cpu_us_per_token:.1f} us")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"results": results, "mask_cpu_us": eng.guided.cpu_us_per_token}, indent=1)
        )


if __name__ == "__main__":
    main()
