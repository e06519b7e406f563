"""Run llama.cpp's benchmarks for a finished bench result and pair every figure with ours."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from localllm.bench.llamacpp.commands import (
    KV_TYPES,
    Invocation,
    batched_invocation,
    bench_invocations,
)
from localllm.bench.llamacpp.parse import parse_batched_bench, parse_llama_bench
from localllm.bench.llamacpp.tools import Tools
from localllm.errors import LocalLLMError

TIMEOUT_S = 1800  # one llama.cpp program run (a 16K-depth tg with 5 reps is well inside)


def _run(path: str, inv: Invocation) -> str:
    argv = [path, *inv.args]
    print(f"bench: running {shlex.join(argv)}", file=sys.stderr)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise LocalLLMError(f"{inv.program} ran past {TIMEOUT_S} s") from None
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise LocalLLMError(f"{inv.program} failed (exit {p.returncode}): {tail}")
    return p.stdout + "\n" + p.stderr  # batched-bench logs its table; llama-bench JSON is stdout


def _frac(x: float | None, ceiling: float | None) -> float | None:
    return x / ceiling if x and ceiling else None


def _pair(figure: str, kind: str, ours: float | None, theirs: float | None, ceiling: float | None, **at: object) -> dict:  # fmt: skip
    """One figure of both engines; `at` says where it was measured (n, depth, kv_dtype, ...)."""
    return {
        "figure": figure,
        "kind": kind,
        **at,
        "localllm": ours,
        "llama_cpp": theirs,
        "ratio": ours / theirs if ours and theirs else None,
        "localllm_of_ceiling": _frac(ours, ceiling),
        "llama_cpp_of_ceiling": _frac(theirs, ceiling),
    }


def pair_bench(doc: dict, tests: list[dict]) -> list[dict]:
    """Our pp, tg and kv rows against llama-bench's tests of the same shape and KV type."""
    theirs = {(t["n_prompt"], t["n_gen"], t["n_depth"], t.get("type_k", "f16")): t["avg_ts"]
              for t in tests}  # fmt: skip
    kv = doc["engine"]["kv_dtype"]
    out = []
    for r in doc["results"].get("pp", []):
        y = theirs.get((r["n_prompt"], 0, 0, KV_TYPES.get(kv)))
        out.append(_pair(f"pp{r['n_prompt']}", "pp", r["tok_s"], y, None, n=r["n_prompt"]))
    seen = set()
    for r in doc["results"].get("tg", []) + doc["results"].get("kv", []):
        key = (0, r["n_gen"], r["depth"], KV_TYPES.get(r["kv_dtype"]))
        if key in seen or key[3] is None:
            continue
        seen.add(key)
        name = f"tg{r['n_gen']}" + (f" @ d{r['depth']}" if r["depth"] else "")
        name += f" ({r['kv_dtype']} KV)"
        at = {"n": r["n_gen"], "depth": r["depth"], "kv_dtype": r["kv_dtype"]}
        out.append(_pair(name, "tg", r["tok_s"], theirs.get(key), r["ceiling_tok_s"], **at))
    return out


def pair_batched(doc: dict, rows: list[dict]) -> list[dict]:
    """Our fixed-concurrency serve rows against llama-batched-bench: decode tok/s vs S_TG,
    generated tok/s over the whole run vs B*TG / T."""
    theirs = {(r["pp"], r["tg"], r["b"]): r for r in rows}
    out = []
    for r in doc["results"].get("serve", []):
        if r["mode"] != "concurrency":
            continue
        t = theirs.get((r["prompt"], r["gen"], r["concurrency"]))
        c = r["concurrency"]
        shape = f"{c} stream{'s' if c > 1 else ''} x ({r['prompt']}+{r['gen']})"
        e2e = t["b"] * t["tg"] / t["t"] if t else None
        s_tg = t["s_tg"] if t else None
        out.append(
            _pair(f"{shape} decode", "serve_decode", r["decode_tok_s"], s_tg, None, concurrency=c)
        )
        out.append(
            _pair(
                f"{shape} end to end", "serve_e2e", r["throughput_tok_s"], e2e, None, concurrency=c
            )
        )
    return out


def run_compare(doc: dict, tools: Tools) -> dict:
    """llama.cpp's figures for doc's measurements: {"commands", "pairs", "tool", "notes"}."""
    model = doc["model"]["file"]
    if not Path(model).is_file():  # an AWQ / safetensors folder
        return {"commands": [], "pairs": [], "tool": {},
                "notes": [f"llama.cpp reads GGUF files only: {model} not compared"]}  # fmt: skip
    invs, notes = bench_invocations(doc, model)
    batched = batched_invocation(doc, model)
    out: dict = {"commands": [], "pairs": [], "tool": {}, "notes": notes}
    tests: list[dict] = []
    for inv in invs if tools.bench else []:
        try:
            tests += parse_llama_bench(_run(tools.bench, inv))  # type: ignore[arg-type]
        except LocalLLMError as e:
            out["notes"].append(str(e))
        out["commands"].append(shlex.join([tools.bench, *inv.args]))  # type: ignore[list-item]
    if invs and not tools.bench:
        out["notes"].append("llama-bench not found: pp and tg not compared")
    if tests:
        out["tool"] = {k: tests[0].get(k) for k in ("build_commit", "build_number", "gpu_info", "backends", "model_type")}  # fmt: skip
        out["pairs"] += pair_bench(doc, tests)
    if batched and tools.batched:
        out["commands"].append(shlex.join([tools.batched, *batched.args]))
        try:
            out["pairs"] += pair_batched(doc, parse_batched_bench(_run(tools.batched, batched)))
        except LocalLLMError as e:
            out["notes"].append(str(e))
    elif batched:
        out["notes"].append("llama-batched-bench not found: serving not compared")
    return out
