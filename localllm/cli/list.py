"""`localllm list`: the models on this machine, with architecture, quantization, size and
context read from each file's header (or folder's config.json)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from localllm.cli.args import HelpFormatter


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list",
        aliases=["ls"],
        formatter_class=HelpFormatter,
        help="list the models on this machine (HF cache, LM Studio, llama.cpp, Ollama, ours)",
        description="List pulled and discovered models. Any NAME shown is accepted by --model.",
    )
    p.add_argument(
        "--models-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="also search this folder (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON array instead of a table")
    p.set_defaults(func=run)


def rows(models_dirs: list[str]) -> list[dict[str, Any]]:
    from localllm.hub.discovery import discover
    from localllm.hub.summary import summarize

    out = []
    for m in discover(models_dirs):
        s = summarize(m.path)
        out.append(
            {
                "name": m.name,
                "source": m.source,
                "arch": s.arch,
                "quant": s.quant,
                "size": m.size,
                "context": s.context,
                "path": str(m.path),
                "error": s.error,
            }
        )
    return out


def table(lines: list[list[str]]) -> str:
    """Left-aligned columns, two spaces apart (SIZE and CONTEXT right-aligned)."""
    widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
    right = {4, 5}
    return "\n".join(
        "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))
        ).rstrip()
        for r in lines
    )


def run(args: argparse.Namespace) -> int:
    from localllm.hub.discovery import HOW_TO_GET_A_MODEL, format_size

    found = rows(args.models_dir)
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    if not found:
        print(HOW_TO_GET_A_MODEL)
        return 0
    lines = [["NAME", "SOURCE", "ARCH", "QUANT", "SIZE", "CONTEXT"]]
    for r in found:
        ctx = str(r["context"]) if r["context"] else "-"
        lines.append([r["name"], r["source"], r["arch"], r["quant"], format_size(r["size"]), ctx])
    print(table(lines))
    for r in found:
        if r["error"]:
            print(f"localllm: {r['name']}: unreadable: {r['error']}", file=sys.stderr)
    return 0
