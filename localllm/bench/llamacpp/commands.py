"""llama.cpp command lines that measure what a bench result measured, with matching settings:
the same file, all layers on the GPU (-ngl 99), flash attention on, the KV cache type that
matches ours (-ctk/-ctv), the same repetitions; pp and tg (at each depth, -d) through
llama-bench, fixed-concurrency serving through llama-batched-bench (-npp/-ntg/-npl)."""

from __future__ import annotations

from dataclasses import dataclass

# our KV dtype -> llama.cpp's cache type (fp8 has none)
KV_TYPES = {"fp16": "f16", "fp32": "f32", "bf16": "bf16", "int8": "q8_0"}
COMMON = ("-ngl", "99", "-fa", "on")
BATCH_ARGS = ("-b", "2048", "-ub", "512")  # llama-batched-bench's batch sizes (its usage line)


@dataclass(frozen=True)
class Invocation:
    program: str  # "llama-bench" | "llama-batched-bench"
    args: tuple[str, ...]


def _csv(xs: object) -> str:
    return ",".join(str(x) for x in sorted(set(xs)))  # type: ignore[call-overload]


def _kv(dtype: str) -> tuple[str, ...]:
    t = KV_TYPES[dtype]
    return ("-ctk", t, "-ctv", t)


def bench_invocations(doc: dict, model: str) -> tuple[list[Invocation], list[str]]:
    """The llama-bench runs for the pp, tg and kv rows of doc, and notes on rows that have no
    llama.cpp counterpart."""
    res, notes = doc["results"], []
    reps = str(doc["sizes"]["reps"])
    base = ("-m", model, "-r", reps, "-o", "json", *COMMON)
    out: list[Invocation] = []
    if res.get("pp"):
        kv = doc["engine"]["kv_dtype"]
        n = _csv(r["n_prompt"] for r in res["pp"])
        out.append(Invocation("llama-bench", (*base, "-p", n, "-n", "0", *_kv(kv))))
    depths: dict[tuple[str, int], set[int]] = {}  # (kv dtype, n_gen) -> depths
    for r in res.get("tg", []) + res.get("kv", []):
        if r["kv_dtype"] not in KV_TYPES:
            notes.append(f"llama.cpp has no {r['kv_dtype']} KV cache: not compared")
            continue
        depths.setdefault((r["kv_dtype"], r["n_gen"]), set()).add(r["depth"])
    for (kv, n_gen), ds in sorted(depths.items()):
        args = (*base, "-p", "0", "-n", str(n_gen), "-d", _csv(ds), *_kv(kv))
        out.append(Invocation("llama-bench", args))
    return out, sorted(set(notes))


def batched_invocation(doc: dict, model: str) -> Invocation | None:
    """llama-batched-bench for the fixed-concurrency serve rows (prompt + gen per stream)."""
    rows = [r for r in doc["results"].get("serve", []) if r["mode"] == "concurrency"]
    if not rows or doc["engine"]["kv_dtype"] not in KV_TYPES:
        return None
    pp, tg = rows[0]["prompt"], rows[0]["gen"]
    npl = [r["concurrency"] for r in rows]
    ctx = max(npl) * (pp + tg)
    args = ("-m", model, "-c", str(ctx), *BATCH_ARGS, "-npp", str(pp), "-ntg", str(tg),
            "-npl", _csv(npl), *COMMON, *_kv(doc["engine"]["kv_dtype"]))  # fmt: skip
    return Invocation("llama-batched-bench", args)
