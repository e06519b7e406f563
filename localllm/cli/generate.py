"""`localllm generate`: stream one completion to stdout, then a one-line summary."""

from __future__ import annotations

import argparse
import sys
import time

from localllm.cli.args import HelpFormatter, add_engine_args, engine_config
from localllm.core import SamplingParams
from localllm.sampling_defaults import GENERATE


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
    p.add_argument("--system", default=None, help="system message (with --chat)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from localllm.engine.engine import LLMEngine

    engine = LLMEngine(engine_config(args, max_num_seqs=1))
    if args.chat:
        msgs = [{"role": "system", "content": args.system}] if args.system else []
        msgs.append({"role": "user", "content": args.prompt})
        text, template = engine.chat_template.render_or_fallback(
            msgs, warn=lambda m: print(f"localllm: warning: {args.model}: {m}", file=sys.stderr)
        )
        ids = engine.tokenizer.encode(text, add_special=not template.renders_bos)
    else:
        ids = engine.encode_prompt(args.prompt)
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
    first = None
    out = sys.stdout
    final = None
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
    t1 = time.perf_counter()
    out.write("\n")
    out.flush()
    n = final.usage.completion_tokens if final and final.usage else 0
    gen_time = (t1 - first) if first else 0.0
    tps = (n - 1) / gen_time if n > 1 and gen_time > 0 else 0.0
    usage = final.usage if final else None
    spec = ""
    if engine.spec_tokens:  # speculation on: say what it did, even nothing
        drafted, accepted = (usage.spec_drafted, usage.spec_accepted) if usage else (0, 0)
        spec = f", speculative: {accepted}/{drafted} drafts accepted"
    print(
        f"[prompt {len(ids)} tokens, generated {n} tokens, {tps:.1f} tok/s, "
        f"first token {((first or t1) - t0) * 1000:.0f} ms{spec}, "
        f"finish: {final.finish_reason if final else '?'}]",
        file=sys.stderr,
    )
    return 0
