"""One table of ratios (ours vs llama.cpp, each with its % of the bandwidth ceiling) from one or
more `localllm bench --compare ... --json` files:

    python3 -m localllm.bench.llamacpp.ratio_table RESULT.json [...] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

COLUMNS = ("model", "figure", "llama.cpp tok/s", "localllm tok/s", "ratio",
           "llama.cpp of ceiling", "localllm of ceiling")  # fmt: skip


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def rows(docs: list[dict]) -> list[list[str]]:
    out = []
    for doc in docs:
        for p in doc.get("compare", {}).get("pairs", []):
            ratio = "-" if p["ratio"] is None else f"{p['ratio']:.2f}x"
            out.append([doc["model"]["name"], p["figure"], _num(p["llama_cpp"]),
                        _num(p["localllm"]), ratio, _pct(p["llama_cpp_of_ceiling"]),
                        _pct(p["localllm_of_ceiling"])])  # fmt: skip
    return out


def header_lines(docs: list[dict]) -> list[str]:
    """Where and with what: GPU, driver, bandwidth, both engines' versions, and any notes."""
    lines = []
    for doc in docs:
        s, c, cmp = doc["system"], doc["code"], doc.get("compare", {})
        tool = cmp.get("tool", {})
        bw = s.get("copy_bandwidth_GBps")
        lines.append(
            f"{doc['model']['name']}: {s['name']} (driver {s.get('driver') or '-'}, copy "
            f"bandwidth {f'{bw:,.0f} GB/s' if bw else 'not measured'}); localllm "
            f"{(c.get('git_commit') or c['version'])[:12]}; llama.cpp build "
            f"{tool.get('build_commit', '?')} ({tool.get('build_number', '?')})"
        )
        lines += [f"  note: {n}" for n in cmp.get("notes", [])]
    return lines


def markdown(docs: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "| " + " | ".join("---" for _ in COLUMNS) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows(docs)]
    return "\n".join(lines + [""] + header_lines(docs))


def print_table(docs: list[dict], console: Console | None = None) -> None:
    from localllm.bench.report import wide_console

    console = console or wide_console()
    t = Table(
        title="localllm vs llama.cpp (same file, same machine, same run)", title_justify="left"
    )
    for i, col in enumerate(COLUMNS):
        t.add_column(col, justify="left" if i < 2 else "right")
    for r in rows(docs):
        t.add_row(*r)
    console.print(t)
    for line in header_lines(docs):
        console.print(line, highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m localllm.bench.llamacpp.ratio_table")
    ap.add_argument("files", nargs="+", help="`localllm bench --compare ... --json` outputs")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = ap.parse_args(argv)
    docs = []
    for f in args.files:
        with open(f) as fh:
            docs.append(json.load(fh))
    if not any(d.get("compare") for d in docs):
        print("error: none of these results has a llama.cpp comparison", file=sys.stderr)
        return 2
    if args.markdown:
        print(markdown(docs))
    else:
        print_table(docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
