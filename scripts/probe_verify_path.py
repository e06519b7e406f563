"""Where the host time of a batch-1 engine step goes, phase by phase, on the real engine (GPU or
CPU): each phase's wall time per step, with wrappers around the engine's own methods (no
profiler: a wrapper costs ~0.3 us a call). For a verify step the phases from the wait's end to
the graph replay are the GPU's idle gap between two steps: its tokens must be known before the
next step can be proposed, scheduled, staged and launched.

Phases: `wait` (the host waiting for the step's tokens: HostIds.tolist), `settle` (the rest of
`_settle`; within it `sample` (less the wait), `take`, `update`), `ids_start` (HostIds: the
ids' copy to the host started), `schedule`, `stage`, `upload`, `replay` (the CUDA
graph launch; `execute` without graphs), `post` (events). The drafts are step_seconds' forced
ones (a fixed token, none accepted), so the n-gram proposer's own time is not in these figures.

Usage: python3 scripts/probe_verify_path.py [--model pycode-22m-q4_k_m.gguf] [--ks 0,4]
       [--steps 300] [--rounds 2]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from localllm.bench.models import resolve_model
from localllm.cli.args import add_engine_args, engine_config
from localllm.engine import engine as engine_mod
from localllm.engine import step_sampling
from localllm.engine.engine import LLMEngine
from localllm.engine.speculative.calibrate import step_seconds

TOTALS: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)


def timed(owner: Any, attr: str, phase: str) -> None:
    """Wrap owner.attr so its wall time adds to TOTALS[phase]."""
    fn: Callable[..., Any] = getattr(owner, attr)

    def wrapper(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            TOTALS[phase] += time.perf_counter() - t0
            CALLS[phase] += 1

    setattr(owner, attr, wrapper)


class _Window:
    """The phase totals of the timed steps only (step_seconds' `around`)."""

    def __enter__(self) -> None:
        TOTALS.clear()
        CALLS.clear()

    def __exit__(self, *exc: object) -> None:
        self.totals, self.calls = dict(TOTALS), dict(CALLS)


def main() -> None:
    ap = argparse.ArgumentParser()
    add_engine_args(ap, model_required=False)
    ap.add_argument("--ks", default="0,4")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--context", type=int, default=512)
    a = ap.parse_args()
    a.model = resolve_model(a.model or "pycode-22m-q4_k_m.gguf")
    ks = [int(k) for k in a.ks.split(",")]
    need = a.context + (a.steps + 8) * (max(ks) + 1) + 256
    eng = LLMEngine(engine_config(a, max_model_len=need, spec_tokens=max(ks)))
    timed(step_sampling.HostIds, "tolist", "wait")
    timed(step_sampling.HostIds, "__init__", "ids_start")
    timed(engine_mod, "sample_step", "sample+wait")
    timed(eng, "_take", "take")
    timed(eng.scheduler, "update", "update")
    timed(eng, "_settle", "settle+wait")
    timed(eng.scheduler, "schedule", "schedule")
    timed(eng, "_postprocess", "post")
    timed(eng, "step", "step")
    g = eng.runner.graphs
    if g is not None and g.enabled:
        timed(g.buf, "stage", "stage")
        timed(g.buf, "upload", "upload")
        for key in list(g.graphs):
            timed(g.graphs[key], "replay", "replay")
    else:
        timed(eng.runner, "execute", "execute")
    print(f"{a.model}: {eng.runner.device}, graphs {'on' if g is not None else 'off'}")
    for rnd in range(a.rounds):
        for k in ks:
            window = _Window()
            us = step_seconds(eng, 1, k, a.steps, a.context, around=window) * 1e6
            steps = window.calls["step"] or 1
            per = {p: window.totals[p] / steps * 1e6 for p in window.totals}
            wait = per.get("wait", 0.0)
            per["settle"] = per.pop("settle+wait", 0.0) - wait  # in it: sample, take, update
            per["sample"] = per.pop("sample+wait", 0.0) - wait
            parts = ", ".join(f"{p} {v:.1f}" for p, v in sorted(per.items()) if p != "step")
            print(f"round {rnd} k={k}: {us:.1f} us/step ({steps} steps); per step, us: {parts}")


if __name__ == "__main__":
    main()
