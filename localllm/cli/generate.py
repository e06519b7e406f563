"""`localllm generate`: stream one completion to stdout, then a one-line summary."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from localllm.cli.args import HelpFormatter, add_engine_args, engine_config
from localllm.cli.progress import load_spinner
from localllm.core import SamplingParams, TokenEvent
from localllm.errors import LocalLLMError
from localllm.sampling_defaults import GENERATE

if TYPE_CHECKING:
    from localllm.engine.engine import LLMEngine


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate", help="generate text from a prompt and print it", formatter_class=HelpFormatter
    )
    add_engine_args(p)
    p.add_argument("--prompt", "-p", required=True, help="prompt text ('' = start from BOS)")
    d = GENERATE
    p.add_argument(
        "--max-tokens", "-n", type=int, default=d.max_tokens, help="most tokens to generate"
    )
    p.add_argument("--temperature", "-t", type=float, default=d.temperature, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=d.top_p, help="nucleus sampling mass")
    p.add_argument("--top-k", type=int, default=d.top_k, help="0 = off")
    p.add_argument("--min-p", type=float, default=d.min_p, help="0 = off")
    p.add_argument("--repeat-penalty", type=float, default=d.repetition_penalty, help="1 = off")
    p.add_argument(
        "--seed", dest="sample_seed", type=int, default=None, help="sampling seed (default: random)"
    )
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument(
        "--chat",
        action="store_true",
        help="wrap the prompt as a user message in the model's chat template",
    )
    p.add_argument("--system", default=None, help="system message (needs --chat; default: none)")
    p.set_defaults(func=run)


def _chat_prompt(engine: LLMEngine, args: argparse.Namespace) -> list[int]:
    """The prompt wrapped in the model's chat template; a model without one (or with a broken
    one) gets a built-in template, named in one stderr line."""
    msgs = [{"role": "system", "content": args.system}] if args.system else []
    msgs.append({"role": "user", "content": args.prompt})
    text, template = engine.chat_template.render_or_fallback(
        msgs, warn=lambda m: print(f"localllm: warning: {args.model}: {m}", file=sys.stderr)
    )
    return engine.tokenizer.encode(text, add_special=not template.renders_bos)


def run(args: argparse.Namespace) -> int:
    from localllm.engine.engine import LLMEngine

    if args.system is not None and not args.chat:
        raise LocalLLMError("--system needs --chat (a system message only exists in a chat)")
    cfg = engine_config(args, max_num_seqs=1)
    with load_spinner(args.verbose) as progress:
        engine = LLMEngine(cfg, progress)
    ids = _chat_prompt(engine, args) if args.chat else engine.encode_prompt(args.prompt)
    params = SamplingParams(
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        repetition_penalty=args.repeat_penalty,
        seed=args.sample_seed,
        stop=args.stop,
    )
    t0 = time.perf_counter()
    rid = engine.add_request(ids, params, continuation=bool(args.prompt) and not args.chat)
    first, final = _stream(engine, rid)
    t1 = time.perf_counter()
    _summary(engine, len(ids), t1 - t0, (first - t0) if first else None, final)
    return 0


def _summary(
    engine: LLMEngine, n_prompt: int, total: float, ttft: float | None, final: TokenEvent | None
) -> None:
    """The one-line summary on stderr: tokens, decode speed, first token, finish reason."""
    usage = final.usage if final else None
    n = usage.completion_tokens if usage else 0
    gen_time = total - ttft if ttft is not None else 0.0
    tps = (n - 1) / gen_time if n > 1 and gen_time > 0 else 0.0
    spec = ""
    if engine.spec_tokens:  # speculation on: say what it did, even nothing
        drafted, accepted = (usage.spec_drafted, usage.spec_accepted) if usage else (0, 0)
        spec = f", speculative: {accepted}/{drafted} drafts accepted"
    print(
        f"[prompt {n_prompt} tokens, generated {n} tokens, {tps:.1f} tok/s, "
        f"first token {(ttft if ttft is not None else total) * 1000:.0f} ms{spec}, "
        f"finish: {final.finish_reason if final else '?'}]",
        file=sys.stderr,
    )


def _stream(engine: LLMEngine, rid: str) -> tuple[float | None, TokenEvent | None]:
    """Step the engine, printing the request's text as it comes: (first token time, the
    final event)."""
    first, final, out = None, None, sys.stdout
    while engine.has_work():
        for ev in engine.step():
            if ev.request_id != rid:
                continue
            if first is None and ev.token_ids:
                first = time.perf_counter()
            out.write(ev.text)
            out.flush()
            if ev.finished:
                final = ev
    out.write("\n")
    out.flush()
    return first, final
