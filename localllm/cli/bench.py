"""`localllm bench`: the benchmark suite (localllm/bench/): scenarios pp, tg, serve, prefix,
itl, kv, spec on any model (default: the synthetic llama3-8b-q4_k_m of ANCHORS.md), a progress
bar, tables and a plain summary, --json, --plot, and --compare llama.cpp side by side."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from localllm.bench.models import DEFAULT_MODEL, resolve_model
from localllm.bench.sizes import Sizes, add_size_args, disabled_by_zero, sizes_from_args
from localllm.bench.suite import DEFAULT, SCENARIOS, context_needed, resolve_names
from localllm.bench.suite.registry import sequences_needed
from localllm.cli.args import HelpFormatter, add_engine_args, engine_config
from localllm.errors import LocalLLMError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark suite: prefill, decode, serving, prefix cache, KV types, speculation",
        description="Measure a model the way llama-bench does and more. Without --model: the "
        f"synthetic {DEFAULT_MODEL} (real shapes, random weights; written on first use). "
        "Scenarios: " + "; ".join(f"{s.name}: {s.help}" for s in SCENARIOS.values()) + ".",
        formatter_class=HelpFormatter,
    )
    add_engine_args(p, model_required=False)
    p.add_argument(
        "--scenario",
        action="append",
        metavar="NAME[,NAME]",
        help=f"scenarios to run, comma list or repeated, 'all' (default: {','.join(DEFAULT)})",
    )
    add_size_args(p)
    out = p.add_argument_group("output")
    out.add_argument(
        "--json", metavar="FILE", help="write the result document ('-': to stdout; default: none)"
    )
    out.add_argument(
        "--plot", metavar="DIR", help="write PNG charts (needs matplotlib; default: none)"
    )
    out.add_argument(
        "--compare",
        metavar="llama.cpp[=DIR]",
        help="also run llama-bench / llama-batched-bench (on PATH, or in DIR) with matching "
        "settings and print both side by side with ratios (default: none)",
    )
    out.add_argument(
        "--profile",
        default="",
        help="comma list of batch sizes: per-kernel decode breakdown (CUDA)",
    )
    out.add_argument(
        "--profile-depth",
        default="0",
        help="comma list of context depths (tokens in the KV cache) at which --profile "
        "breaks decode down (default: 0)",
    )
    out.add_argument("--prefix-test", action="store_true", help="add the prefix scenario")
    out.add_argument("--itl-test", action="store_true", help="add the itl scenario")
    out.add_argument("--spec", action="store_true", help="add the spec scenario")
    out.add_argument(
        "--spec-prompts",
        default="auto",
        choices=["auto", "chat", "code", "story"],
        help="prompt set of the spec scenario (auto: chat if the model has a chat template, "
        "else code)",
    )
    p.set_defaults(func=run)


# the switches of the llama-bench-style command line that came before --scenario
SWITCHES = {"prefix_test": "prefix", "itl_test": "itl", "spec": "spec"}


def _legacy_selection(args: argparse.Namespace) -> set[str] | None:
    """Without --scenario, a command line written for the earlier bench (-p, -n, --parallel or
    a switch given) keeps its meaning: pp and tg, serve with --parallel, plus the switches."""
    given = [args.size_pp, args.size_tg, args.size_concurrency]
    if args.scenario or not (any(x is not None for x in given) or any(vars(args)[s] for s in SWITCHES)):  # fmt: skip
        return None
    return {"pp", "tg"} | ({"serve"} if args.size_concurrency is not None else set())


def scenario_names(args: argparse.Namespace) -> list[str]:
    """--scenario (default DEFAULT; see _legacy_selection), plus the switches (--prefix-test,
    --itl-test, --spec), minus what -p 0 / -n 0 drop."""
    names = _legacy_selection(args) or set(resolve_names(args.scenario or DEFAULT))
    names |= {name for flag, name in SWITCHES.items() if vars(args)[flag]}
    names -= disabled_by_zero(args)
    if not names:
        raise LocalLLMError("bench: no scenario left to run")
    return [n for n in SCENARIOS if n in names]


def spec_k(args: argparse.Namespace) -> int | None:
    """Drafts per step of the spec scenario: --spec-tokens, else None (the engine's own limit,
    as `generate` and `serve` take it; bench/spec.py's where speculation is off by default)."""
    k = args.spec_tokens
    if k == 0:
        raise LocalLLMError("bench: spec compares speculation on and off: give --spec-tokens >= 1")
    return k


def _base_config(
    args: argparse.Namespace, names: list[str], sizes: Sizes, profile: tuple[int, ...] = (),
    profile_depths: tuple[int, ...] = (0,),
):  # fmt: skip
    """The main engine's config, sized for the chosen scenarios and the --profile batches at
    their depths (with speculation on when spec is the only scenario: one engine instead of
    two)."""
    from localllm.bench.profile import PROFILE_CONTEXT

    deepest = PROFILE_CONTEXT + max(profile_depths)
    need = max(context_needed(names, sizes), deepest if profile else 0)
    if args.max_model_len and args.max_model_len < need:
        raise LocalLLMError(
            f"bench: these scenarios need a context of {need} tokens; --max-model-len "
            f"{args.max_model_len} is shorter (or choose smaller sizes)"
        )
    return engine_config(
        args,
        model=resolve_model(args.model or DEFAULT_MODEL),
        max_model_len=args.max_model_len or need,
        max_num_seqs=max(args.max_num_seqs, sequences_needed(names, sizes), *profile),
        max_num_batched_tokens=max(args.max_num_batched_tokens, *sizes.pp),
        **({"spec_tokens": spec_k(args)} if names == ["spec"] else {}),  # None: the default
    )


def _profile_depths(text: str) -> tuple[int, ...]:
    """--profile-depth: a comma list of context depths (>= 0 tokens)."""
    try:
        depths = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        depths = ()
    if not depths or min(depths) < 0:
        raise LocalLLMError(f"--profile-depth {text!r}: a comma list of token counts (>= 0)")
    return depths


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _build(cfg):
    from localllm.engine.engine import LLMEngine

    return LLMEngine(cfg)


def model_label(ref: str) -> str:
    """How results name the model: a file's name without .gguf, else the reference given."""
    p = Path(ref)
    return p.name.removesuffix(".gguf") if p.exists() else ref


def _command() -> str | None:
    """The command line as typed (None when bench was called in process, e.g. by tests)."""
    if sys.argv[1:2] != ["bench"]:
        return None
    return shlex.join(["localllm", *sys.argv[1:]])


def run(args: argparse.Namespace) -> int:
    from localllm.bench.run import run_suite

    names = scenario_names(args)
    sizes = sizes_from_args(args)
    k = spec_k(args) if "spec" in names else None
    try:
        profile = tuple(int(x) for x in args.profile.split(",") if x.strip())
    except ValueError:
        raise LocalLLMError(f"--profile {args.profile!r}: a comma list of batch sizes") from None
    depths = _profile_depths(args.profile_depth)
    if depths != (0,) and not profile:
        raise LocalLLMError("--profile-depth: give the batch sizes to profile with --profile")
    tools = None
    if args.compare:  # fail before a long run, not after it
        from localllm.bench.llamacpp.tools import find_tools

        tools = find_tools(args.compare)
    if args.plot:
        from localllm.bench.plots import require_matplotlib

        require_matplotlib()
    if args.json not in (None, "-") and not Path(args.json).resolve().parent.is_dir():
        raise LocalLLMError(f"--json {args.json}: its folder does not exist")
    if args.model is None and not _has_cuda():
        print(
            f"localllm: warning: no CUDA GPU: {DEFAULT_MODEL} (8B) on the CPU takes hours; "
            "try --model FILE --sizes tiny",
            file=sys.stderr,
        )
    cfg = _base_config(args, names, sizes, profile, depths)
    doc = run_suite(
        cfg, names, sizes, _build,
        model_label=model_label(args.model or DEFAULT_MODEL),
        command=_command(),
        spec_k=k,
        spec_prompts=args.spec_prompts,
        profile_batches=profile,
        profile_depths=depths,
    )  # fmt: skip
    if tools is not None:
        from localllm.bench.llamacpp.compare import run_compare

        doc["compare"] = run_compare(doc, tools)
    _output(args, doc)
    return 0


def _output(args: argparse.Namespace, doc: dict) -> None:
    from localllm.bench.report import print_report

    text = json.dumps(doc, indent=2)
    if args.json == "-":
        print(text)
    else:
        if args.json:  # first: a long run's figures are kept whatever happens next
            Path(args.json).write_text(text)
        print_report(doc)
        if doc.get("compare"):
            from localllm.bench.llamacpp.ratio_table import print_table

            print_table([doc])
    if args.plot:
        from localllm.bench.plots import write_plots

        for path in write_plots(doc, args.plot):
            print(f"wrote {path}", file=sys.stderr)
