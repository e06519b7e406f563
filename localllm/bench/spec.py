"""Speculative decoding on vs off: per-prompt decode speed, acceptance and mean accepted run
on input-grounded and open-ended prompts (batch 1), aggregate throughput with many streams,
and the cost of one verify step relative to a plain decode step."""

from __future__ import annotations

import time
from dataclasses import dataclass

from localllm.bench.spec_prompts import chat_prompts, code_prompts, story_prompts
from localllm.core import SamplingParams
from localllm.engine.speculative.calibrate import sync

# k of `localllm bench --spec` without --spec-tokens where the engine does not speculate by
# default (the CPU); on a GPU it takes the engine's own limit, as generate and serve do
BENCH_SPEC_TOKENS = 4


@dataclass
class Run:
    ids: list[int]
    decode_s: float  # first token to last
    drafted: int
    accepted: int
    steps: int  # verify steps

    @property
    def tok_s(self) -> float:
        return (len(self.ids) - 1) / self.decode_s if self.decode_s > 0 else 0.0


def generate_one(engine, prompt: list[int], gen: int, k: int) -> Run:
    """One greedy request alone (k: its speculative.n_max, 0 = off)."""
    params = SamplingParams(max_tokens=gen, temperature=0.0, spec_tokens=k)
    rid = engine.add_request(prompt, params)
    ids: list[int] = []
    first = end = None
    stats: dict = {}
    usage = None
    while engine.has_work():
        for ev in engine.step():
            if ev.request_id != rid:
                continue
            if ev.token_ids and first is None:
                sync(engine)
                first = time.perf_counter()
            ids += ev.token_ids
            if ev.finished:
                sync(engine)
                end, stats = time.perf_counter(), ev.stats or {}
                usage = ev.usage
    assert first is not None and end is not None and usage is not None
    return Run(
        ids, end - first, usage.spec_drafted, usage.spec_accepted, stats.get("spec_steps", 0)
    )


def prompt_set(engine, which: str) -> list[tuple[str, list[int]]]:
    """(kind, ids) of the chat, code or story prompts; "auto": chat if the model has a chat
    template of its own, else code."""
    if which == "auto":
        which = "code" if engine.chat_template.is_builtin else "chat"
    sets = {"chat": chat_prompts, "code": code_prompts, "story": story_prompts}
    if which not in sets:
        raise ValueError(f"unknown prompt set {which!r}: chat, code, story or auto")
    out = []
    for kind, text in sets[which]():
        if which == "chat":
            msgs = [{"role": "user", "content": text}]
            rendered = engine.chat_template.render(msgs, add_generation_prompt=True)
            ids = engine.tokenizer.encode(
                rendered, add_special=not engine.chat_template.renders_bos
            )
        else:
            ids = engine.encode_prompt(text)
        out.append((kind, ids))
    return out


def compare(
    engine, prompts: list[tuple[str, list[int]]], gen: int, k: int, repeats: int = 1
) -> dict:
    """Each prompt alone, off then on, `repeats` times in turn (each prompt's decode time is its
    best of them: a tiny model's request takes milliseconds and the host's speed drifts between
    runs): per kind, decode speedup (summed time), acceptance, mean accepted run and how many
    outputs were identical (on against off, in every repeat)."""
    generate_one(engine, prompts[0][1], 8, k)  # warm-up
    kinds: dict[str, dict] = {}
    for kind, ids in prompts:
        off, on, same = _best_of(engine, ids, gen, k, max(1, repeats))
        agg = kinds.setdefault(kind, dict.fromkeys(("off_s", "on_s", "tok_off", "tok_on",
                                                     "drafted", "accepted", "steps", "same", "n"), 0))  # fmt: skip
        agg["off_s"] += off.decode_s
        agg["on_s"] += on.decode_s
        agg["tok_off"] += len(off.ids) - 1
        agg["tok_on"] += len(on.ids) - 1
        for f in ("drafted", "accepted", "steps"):
            agg[f] += getattr(on, f)
        agg["same"] += same
        agg["n"] += 1
    return {kind: _summary(a) for kind, a in kinds.items()}


def _best_of(engine, ids: list[int], gen: int, k: int, repeats: int) -> tuple[Run, Run, bool]:
    """(off, on, identical) for one prompt: off and on alternate `repeats` times, each run the
    fastest of its mode; identical: on's tokens equal off's in every repeat."""
    off = on = None
    same = True
    for _ in range(repeats):
        a, b = generate_one(engine, ids, gen, 0), generate_one(engine, ids, gen, k)
        same = same and a.ids == b.ids
        off = a if off is None or a.decode_s < off.decode_s else off
        on = b if on is None or b.decode_s < on.decode_s else on
    assert off is not None and on is not None
    return off, on, same


def _summary(a: dict) -> dict:
    off = a["tok_off"] / a["off_s"] if a["off_s"] else 0.0
    on = a["tok_on"] / a["on_s"] if a["on_s"] else 0.0
    return {
        "prompts": a["n"],
        "identical": a["same"],
        "tok_s_off": off,
        "tok_s_on": on,
        "speedup": on / off if off else 0.0,
        "drafted": a["drafted"],
        "accepted": a["accepted"],
        "acceptance": a["accepted"] / a["drafted"] if a["drafted"] else 0.0,
        "mean_run": a["accepted"] / a["steps"] if a["steps"] else 0.0,  # drafts taken per verify
        "steps": a["steps"],  # verify steps
        "tokens_on": a["tok_on"],  # decode tokens (after the first) with speculation on
    }


def throughput(engine, prompts: list[list[int]], streams: int, gen: int, k: int,
               repeats: int = 3) -> float:  # fmt: skip
    """Generated tokens per second of `streams` concurrent greedy requests (prompts cycled), the
    best of `repeats` timed runs: a small model's run takes tens of ms, and whole runs of the same
    work measured up to 2x apart on an H200 (session 13)."""
    batch = [prompts[i % len(prompts)] for i in range(streams)]
    params = SamplingParams(max_tokens=gen, temperature=0.0, ignore_eos=True, spec_tokens=k)
    # the same run once first: every batch width's shapes compiled, the prompts in the prefix cache
    engine.generate(batch, [params] * streams)
    best = 0.0
    for _ in range(repeats):
        sync(engine)
        t0 = time.perf_counter()
        out = engine.generate(batch, [params] * streams)
        sync(engine)
        best = max(best, sum(len(o) for o in out) / (time.perf_counter() - t0))
    return best


def format_compare(k: int, gen: int, res: dict) -> list[str]:
    lines = []
    for kind, r in res.items():
        lines.append(
            f"speculative k={k}, batch 1, {gen} tokens, {kind} ({r['prompts']} prompts): "
            f"{r['speedup']:.2f}x ({r['tok_s_off']:.1f} -> {r['tok_s_on']:.1f} tok/s), "
            f"acceptance {100 * r['acceptance']:.0f}%, mean accepted run {r['mean_run']:.2f}, "
            f"identical output {r['identical']}/{r['prompts']}"
        )
    return lines
