"""Where a speculating batch-1 request's time goes, step by step, on real prompts (GPU or CPU):
each engine step is put in a kind by how it was launched and what it fed, with its count and
mean wall time (the `step()` call that finished it), and the phase totals of
`probe_verify_path.py` over the same requests. The verify-step probes time forced drafts back to
back; a real request also has plain steps between runs of drafts, launched serially (no step
overlap until `QUIET_STEPS` proposals in a row found nothing), and proposals at real contexts.

Kinds: `verify` (fed drafts), `plain serial` (no drafts, launched after the step before it had
given its tokens), `plain early` (launched before the previous step's events were made),
`plain ahead` (launched before the previous step's tokens were known: step overlap).

`--quiet 1,2,4` repeats the runs with speculator.QUIET_STEPS set to each value (the engine's is
policy.QUIET_STEPS).

Usage: python3 scripts/probe_spec_steps.py [--model pycode-22m-q4_k_m.gguf] [--ks 0,8]
       [--prompts code] [--kind grounded] [--gen 128] [--rounds 2] [--quiet N,...]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any

from probe_verify_path import CALLS, TOTALS, timed

from localllm.bench.models import resolve_model
from localllm.bench.spec import generate_one, prompt_set
from localllm.cli.args import add_engine_args, engine_config
from localllm.engine import engine as engine_mod
from localllm.engine import step_sampling
from localllm.engine.engine import LLMEngine
from localllm.engine.speculative import speculator

KIND_COUNT: dict[str, int] = defaultdict(int)
KIND_US: dict[str, float] = defaultdict(float)


def classify(eng: LLMEngine) -> None:
    """Tag each launched step with how it was launched; time each step() call by the kind of
    the step it finished."""
    origin: dict[int, str] = {}
    state = {"in_finish": False, "finished": ""}
    launch, launch_ahead, finish, step = eng._launch, eng._launch_ahead, eng._finish, eng.step

    def _launch(*a: Any, **kw: Any) -> Any:
        cur, events = launch(*a, **kw)
        if cur is not None:
            drafts = any(it.draft_ids for it in cur.batch.items)
            origin[id(cur)] = "verify" if drafts else (
                "plain early" if state["in_finish"] else "plain serial")  # fmt: skip
        return cur, events

    def _launch_ahead(*a: Any, **kw: Any) -> Any:
        cur = launch_ahead(*a, **kw)
        if cur is not None:
            origin[id(cur)] = "plain ahead"
        return cur

    def _finish(cur: Any) -> Any:
        state["in_finish"] = True
        try:
            return finish(cur)
        finally:
            state["in_finish"] = False
            state["finished"] = origin.pop(id(cur), "other")

    def _step() -> Any:
        state["finished"] = ""
        t0 = time.perf_counter()
        out = step()
        kind = state["finished"] or "none"
        KIND_COUNT[kind] += 1
        KIND_US[kind] += (time.perf_counter() - t0) * 1e6
        return out

    eng._launch, eng._launch_ahead, eng._finish, eng.step = _launch, _launch_ahead, _finish, _step


def main() -> None:
    ap = argparse.ArgumentParser()
    add_engine_args(ap, model_required=False)
    ap.add_argument("--ks", default="0,8", help="drafts at most per step (0: off)")
    ap.add_argument("--prompts", default="code", help="bench/spec_prompts set")
    ap.add_argument("--kind", default="grounded", help="prompt kind: grounded, open or all")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quiet", default=str(speculator.QUIET_STEPS), help="QUIET_STEPS values")
    a = ap.parse_args()
    a.model = resolve_model(a.model or "pycode-22m-q4_k_m.gguf")
    ks = [int(k) for k in a.ks.split(",")]
    eng = LLMEngine(engine_config(a, spec_tokens=max(ks) or None))
    prompts = [ids for kind, ids in prompt_set(eng, a.prompts) if a.kind in ("all", kind)]
    timed(step_sampling.HostIds, "tolist", "wait")
    timed(engine_mod, "sample_step", "sample+wait")
    timed(eng.scheduler, "update", "update")
    timed(eng, "_settle", "settle+wait")
    timed(eng.speculator, "propose", "propose")
    timed(eng.scheduler, "schedule", "schedule")
    timed(eng, "_postprocess", "post")
    g = eng.runner.graphs
    if g is not None and g.enabled:
        timed(g.buf, "stage", "stage")
        timed(g.buf, "upload", "upload")
    classify(eng)
    for ids in prompts:  # every width compiled and captured, the prompts in the prefix cache
        for k in ks:
            generate_one(eng, ids, 16, k)
    print(f"{a.model}: {eng.runner.device}, {len(prompts)} {a.kind} prompts, {a.gen} tokens")
    for rnd in range(a.rounds):
        for quiet in [int(q) for q in a.quiet.split(",")]:
            speculator.QUIET_STEPS = quiet
            for k in ks:
                run_k(eng, prompts, a.gen, k, f"round {rnd} quiet {quiet} k={k}")


def run_k(eng: LLMEngine, prompts: list[list[int]], gen: int, k: int, tag: str) -> None:
    TOTALS.clear()
    CALLS.clear()
    KIND_COUNT.clear()
    KIND_US.clear()
    tokens, secs = 0, 0.0
    for ids in prompts:
        run = generate_one(eng, ids, gen, k)
        tokens, secs = tokens + len(run.ids) - 1, secs + run.decode_s
    steps = sum(KIND_COUNT.values()) or 1
    per = {p: v / steps * 1e6 for p, v in TOTALS.items()}
    wait = per.get("wait", 0.0)
    per["settle"] = per.pop("settle+wait", 0.0) - wait
    per["sample"] = per.pop("sample+wait", 0.0) - wait
    kinds = ", ".join(
        f"{kd} {n} x {KIND_US[kd] / n:.1f} us" for kd, n in sorted(KIND_COUNT.items())
    )
    phases = ", ".join(f"{p} {v:.1f}" for p, v in sorted(per.items()))
    print(f"{tag}: {tokens / secs:.1f} tok/s ({tokens} tokens, {steps} step calls); steps: "
          f"{kinds}; per step call, us: {phases}")  # fmt: skip


if __name__ == "__main__":
    main()
