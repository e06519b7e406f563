"""`localllm` command line: one subcommand module each, registered here."""

from __future__ import annotations

import argparse
import logging
import sys

from localllm import __version__
from localllm.cli import bench, chat, generate, info, pull, rm, serve
from localllm.cli import list as list_
from localllm.cli.args import HelpFormatter

# subcommand modules; each defines add_parser(subparsers), which sets `func`
SUBCOMMANDS = (generate, serve, chat, bench, pull, list_, rm, info)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="localllm", description="Fast local LLM inference.", formatter_class=HelpFormatter
    )
    p.add_argument("--version", action="version", version=f"localllm {__version__}")
    p.add_argument("--verbose", "-v", action="store_true", help="log engine progress to stderr")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for mod in SUBCOMMANDS:
        mod.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from localllm.errors import LocalLLMError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except LocalLLMError as e:
        print(f"localllm: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("", file=sys.stderr)
        return 130
