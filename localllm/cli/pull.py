"""`localllm pull`: download a model from the Hugging Face Hub into the normal HF cache."""

from __future__ import annotations

import argparse

from localllm.cli.args import HelpFormatter
from localllm.errors import LocalLLMError

REFERENCE_HELP = "owner/repo (its Q4_K_M GGUF, its only GGUF, or its safetensors folder), "
REFERENCE_HELP += "owner/repo:QUANT (any case, e.g. :q8_0) or owner/repo/FILE.gguf"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pull",
        formatter_class=HelpFormatter,
        help="download a model from the Hugging Face Hub",
        description="Download into the Hugging Face cache (resumable, checked against the "
        "Hub's sha256), where huggingface_hub, llama.cpp users' scripts and `localllm list` "
        "find it. HF_ENDPOINT, HF_TOKEN and HF_HUB_CACHE are honoured.",
    )
    p.add_argument("reference", metavar="REPO[:QUANT|/FILE]", help=REFERENCE_HELP)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from localllm.hub.discovery import format_size
    from localllm.hub.pull import pull
    from localllm.hub.refs import parse_repo_ref

    ref = parse_repo_ref(args.reference)
    if ref is None:
        raise LocalLLMError(
            f"{args.reference}: not a Hugging Face reference (use owner/repo, "
            "owner/repo:QUANT or owner/repo/FILE.gguf)"
        )
    result = pull(ref)
    state = "downloaded" if result.downloaded else "already up to date"
    print(f"{ref}: {state}, {format_size(result.nbytes)} in {len(result.files)} file(s)")
    print(f"  {result.path}")
    print(f"run it: localllm chat --model {ref}")
    return 0
