"""The tables printed at the end of a bench run (rich), one per scenario, from the result
document alone (so `--json` output can be printed again the same way)."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.table import Table


def _n(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _pm(row: dict) -> str:
    return f"{_n(row['tok_s'])} ± {_n(row['stdev_tok_s'])}"


def _lat(d: dict) -> str:
    return f"{_n(d['p50'])} / {_n(d['p90'])} / {_n(d['p99'])}"


def _tg_cells(r: dict) -> list[str]:
    return [f"tg{r['n_gen']}", str(r["depth"]), r["kv_dtype"], _pm(r),
            _n(r["ceiling_tok_s"], 0), _pct(r["fraction_of_ceiling"])]  # fmt: skip


def _serve_cells(r: dict) -> list[str]:
    load = f"{r['concurrency']} streams" if r["mode"] == "concurrency" else f"{r['rate']:g} req/s"
    return [load, str(r["requests"]), _n(r["throughput_tok_s"]), _n(r["decode_tok_s"]),
            _lat(r["ttft_ms"]), _lat(r["itl_ms"]), f"{r['slo_met']}/{r['requests']}",
            _n(r["goodput_req_s"], 2)]  # fmt: skip


def _spec_cells(r: dict) -> list[str]:
    return [f"{r['prompt']} ({r['prompt_set']})", str(r["prompts"]), str(r["spec_tokens"]),
            _n(r["tok_s_off"]), _n(r["tok_s_on"]), f"{r['speedup']:.2f}x", _pct(r["acceptance"]),
            f"{r['mean_run']:.2f}", f"{r['identical']}/{r['prompts']}"]  # fmt: skip


# scenario -> (title, columns, cells of one row)
TABLES: dict[str, tuple[str, tuple[str, ...], Callable[[dict], list[str]]]] = {
    "pp": ("Prefill (pp)", ("test", "tok/s"), lambda r: [f"pp{r['n_prompt']}", _pm(r)]),
    "tg": ("Decode, batch 1 (tg)",
           ("test", "depth", "KV", "tok/s", "ceiling tok/s", "of ceiling"), _tg_cells),
    "serve": ("Serving many streams",
              ("load", "requests", "gen tok/s", "decode tok/s", "TTFT ms p50/p90/p99",
               "ITL ms p50/p90/p99", "met SLO", "goodput req/s"), _serve_cells),
    "prefix": ("Prefix cache", ("system + user tokens", "cold TTFT ms", "cached TTFT ms", "ratio", "cached tokens"),
               lambda r: [f"{r['prefix_tokens']} + {r['suffix_tokens']}", _n(r["cold_ttft_ms"]),
                          _n(r["warm_ttft_ms"]), _pct(r["ratio"]), str(r["cached_tokens"][0])]),
    "itl": ("Inter-token latency during a long prefill",
            ("streams", "prompt", "p50 / p99 unloaded ms", "p50 / p99 loaded ms", "ratio (median run)",
             "ratio of each run"),
            lambda r: [str(r["streams"]), str(r["long_prompt"]),
                       f"{_n(r['unloaded_p50_ms'], 2)} / {_n(r['unloaded_p99_ms'], 2)}",
                       f"{_n(r['loaded_p50_ms'], 2)} / {_n(r['loaded_p99_ms'], 2)}", f"{r['ratio']:.2f}x",
                       ", ".join(f"{x:.2f}x" for x in r["ratio_samples"])]),
    "kv": ("KV cache dtypes", ("KV", "pool tokens", "tokens/GiB", "depth", "tok/s", "of ceiling"),
           lambda r: [r["kv_dtype"], f"{r['capacity_tokens']:,}", f"{r['tokens_per_gib']:,}",
                      str(r["depth"]), _pm(r), _pct(r["fraction_of_ceiling"])]),
    "spec": ("Speculative decoding, batch 1", ("prompts", "n", "k", "off tok/s", "on tok/s",
             "speedup", "accepted", "mean run", "same output"), _spec_cells),
}  # fmt: skip


def tables(doc: dict) -> list[Table]:
    out = []
    for name, rows in doc["results"].items():
        title, columns, cells = TABLES[name]
        t = Table(title=title, title_justify="left")
        for i, col in enumerate(columns):
            t.add_column(col, justify="left" if i == 0 else "right")
        for r in rows:
            t.add_row(*cells(r))
        out.append(t)
    return out


def footer(doc: dict) -> list[str]:
    s, m, e, c = doc["system"], doc["model"], doc["engine"], doc["code"]
    bw = (
        f"{s['copy_bandwidth_GBps']:,.0f} GB/s copy"
        if s["copy_bandwidth_GBps"]
        else "copy bandwidth n/a (measured on CUDA only: the CPU path reads dense weight "
        "copies, so there is no bandwidth ceiling to compare with)"
    )
    ceiling = f", ceiling {m['ceiling_tok_s']:,.0f} tok/s" if m["ceiling_tok_s"] else ""
    code = (c["git_commit"] or "")[:12] + ("+dirty" if c["git_dirty"] else "") or c["version"]
    lines = [
        f"{s['name']} (driver {s['driver'] or '-'}), {bw}; {m['name']}: "
        f"{m['weight_bytes_per_token'] / 1e9:.2f} GB of weights per token{ceiling}; "
        f"KV {e['kv_dtype']}, {e['kv_capacity_tokens']:,} tokens; "
        f"{'programmatic dependent launch; ' if e.get('pdl') else ''}"
        f"{'step overlap; ' if e.get('step_overlap') else ''}sha256 {m['sha256'][:12]}; "
        f"localllm {code}",
    ]
    lines += [f"skipped {k}: {v}" for k, v in doc["skipped"].items()]
    lines += doc.get("notes", [])
    return lines  # fmt: skip


def wide_console() -> Console:
    """stdout; 160 columns when it is not a terminal (logs), so tables do not wrap."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def print_report(doc: dict, console: Console | None = None) -> None:
    from localllm.bench.summary import summary_lines

    console = console or wide_console()
    for t in tables(doc):
        console.print(t)
    if doc.get("profile"):
        from localllm.bench.profile import format_profile

        for prof in doc["profile"]:
            console.print(format_profile(prof), highlight=False)
    for line in footer(doc):
        console.print(line, highlight=False, soft_wrap=True)
    console.print()
    for line in summary_lines(doc):
        console.print(line, highlight=False, soft_wrap=True)
