"""`localllm` command line: one subcommand module each, registered here."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from localllm import __version__
from localllm.cli import bench, chat, generate, info, pull, rm, serve
from localllm.cli import list as list_
from localllm.cli.args import HelpFormatter

# subcommand modules; each defines add_parser(subparsers), which sets `func`
SUBCOMMANDS = (generate, serve, chat, bench, pull, list_, rm, info)
VERBOSE_HELP = (
    "log the engine's progress to stderr (load stages, KV pool size, CUDA graph capture); "
    "-vv also logs every request (default: warnings only)"
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="localllm", description="Fast local LLM inference.", formatter_class=HelpFormatter
    )
    p.add_argument("--version", action="version", version=f"localllm {__version__}")
    p.add_argument("--verbose", "-v", action="count", default=0, help=VERBOSE_HELP)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for mod in SUBCOMMANDS:
        mod.add_parser(sub)
    # -v also after the command (SUPPRESS keeps the count); aliases share one parser
    for cmd in {id(c): c for c in sub.choices.values()}.values():
        cmd.add_argument(
            "--verbose", "-v", action="count", default=argparse.SUPPRESS, help=VERBOSE_HELP
        )
    return p


def _setup_logging(verbose: int) -> None:
    """Warnings always; -v: the engine's progress (load stages, pool size, graph capture);
    -vv: also each request (debug)."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if verbose:
        logging.getLogger("localllm").setLevel(logging.INFO if verbose == 1 else logging.DEBUG)


def main(argv: list[str] | None = None) -> int:
    from localllm.errors import LocalLLMError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _setup_logging(args.verbose)
    try:
        return int(args.func(args) or 0)
    except LocalLLMError as e:
        print(f"localllm: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `localllm generate ... | head`: the reader left, stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 1
