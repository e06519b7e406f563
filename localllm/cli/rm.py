"""`localllm rm`: delete a pulled model (HF cache or our models folder), after asking."""

from __future__ import annotations

import argparse
import sys

from localllm.cli.args import HelpFormatter


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rm",
        formatter_class=HelpFormatter,
        help="delete a pulled model",
        description="Delete a model from the Hugging Face cache or ~/.cache/localllm/models. "
        "Models of Ollama, LM Studio and llama.cpp are left to those tools.",
    )
    p.add_argument(
        "model",
        metavar="MODEL",
        help="a NAME from `localllm list`, owner/repo (all its files), owner/repo:QUANT "
        "or owner/repo/FILE.gguf",
    )
    p.add_argument("--yes", "-y", action="store_true", help="delete without asking")
    p.set_defaults(func=run)


def _confirmed(question: str) -> bool:
    print(question, end=" ", flush=True)
    answer = sys.stdin.readline()
    if not answer:
        print()
    return answer.strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    from localllm.hub.discovery import format_size
    from localllm.hub.remove import plan_removal

    plan = plan_removal(args.model)
    print("will delete:")
    for m in plan.models:
        print(f"  {m.name}  ({m.source}, {format_size(m.size)})  {m.path}")
    freed = format_size(plan.nbytes)
    if not args.yes and not _confirmed(f"delete, freeing {freed}? [y/N]"):
        print("nothing deleted (answer y, or pass --yes)", file=sys.stderr)
        return 1
    plan.execute()
    print(f"deleted {len(plan.models)} model(s), freed {freed}")
    return 0
