"""A few plain sentences about a bench result for someone who does not read tok/s tables."""

from __future__ import annotations

WORDS_PER_TOKEN = 0.75  # English text, typical LLM tokenizers
READING_WORDS_S = 4.0  # a fast reader


def _tg(rows: list[dict]) -> list[str]:
    first, deepest = rows[0], rows[-1]
    words = first["tok_s"] * WORDS_PER_TOKEN
    out = [
        f"One conversation: it writes {first['tok_s']:,.0f} tokens/s (about {words:,.0f} words "
        f"a second, {words / READING_WORDS_S:,.0f}x faster than you read)."
    ]
    if first["fraction_of_ceiling"]:
        out.append(
            f"That is {100 * first['fraction_of_ceiling']:.0f}% of the most this GPU's memory "
            "bandwidth allows for this model (every weight is read once per token)."
        )
    if deepest is not first:
        out.append(
            f"With {deepest['depth']:,} tokens of conversation already in context: "
            f"{deepest['tok_s']:,.0f} tokens/s."
        )
    return out


def _pp(rows: list[dict]) -> list[str]:
    r = rows[-1]
    secs = r["n_prompt"] / r["tok_s"]
    return [f"Reading a {r['n_prompt']:,}-token prompt takes {1000 * secs:,.0f} ms "
            f"({r['tok_s']:,.0f} tokens/s)."]  # fmt: skip


def _serve(rows: list[dict]) -> list[str]:
    fixed = [r for r in rows if r["mode"] == "concurrency"]
    if not fixed:
        return []
    best = max(fixed, key=lambda r: r["throughput_tok_s"])
    c = best["concurrency"]
    return [
        f"{c} users at once: {best['throughput_tok_s']:,.0f} tokens/s in total, about "
        f"{best['throughput_tok_s'] / c:,.0f} each; half of them saw their first token within "
        f"{best['ttft_ms']['p50']:,.0f} ms."
    ]


def _prefix(rows: list[dict]) -> list[str]:
    r = rows[0]
    return [f"A {r['prefix_tokens']:,}-token system prompt seen before answers in "
            f"{r['warm_ttft_ms']:,.0f} ms instead of {r['cold_ttft_ms']:,.0f} ms (prefix cache)."]  # fmt: skip


def _kv(rows: list[dict]) -> list[str]:
    per_gib: dict[str, int] = {}
    for r in rows:
        per_gib.setdefault(r["kv_dtype"], r["tokens_per_gib"])
    parts = ", ".join(f"{d} {n:,}" for d, n in per_gib.items())
    return [f"Tokens of context per GiB of memory, by KV cache type: {parts}."]


def _spec(rows: list[dict]) -> list[str]:
    parts = ", ".join(f"{r['prompt']} {r['speedup']:.2f}x" for r in rows)
    return [f"Speculative decoding speed-up: {parts}."]


SENTENCES = {"tg": _tg, "pp": _pp, "serve": _serve, "prefix": _prefix, "kv": _kv, "spec": _spec}


def summary_lines(doc: dict) -> list[str]:
    lines = []
    for name, make in SENTENCES.items():
        rows = doc["results"].get(name)
        if rows:
            lines += make(rows)
    if not lines:
        return []
    return [f"In short ({doc['model']['name']} on {doc['system']['name']}):"] + [
        f"  {line}" for line in lines
    ]
