"""Many streams with speculation on and off in one engine: per run the tok/s and the slowest
engine steps with what they held (prefill items, decode items, drafts, tokens), to tell a
slower kind of step from a one-off stall.

Usage: python3 scripts/probe_streams.py MODEL [--streams 32] [--gen 64] [--ks 0,4,0,4,4]
"""

from __future__ import annotations

import argparse
import time

import torch

from localllm.bench.spec import prompt_set
from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--streams", type=int, default=32)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--ks", default="0,4,0,4,4", help="speculative.n_max of each pair of runs")
    ap.add_argument("--which", default="code", help="prompt set (cycled over the streams)")
    a = ap.parse_args()
    cfg = EngineConfig(model=a.model, spec_tokens=max(int(k) for k in a.ks.split(",")),
                       max_model_len=2048, max_num_seqs=a.streams)  # fmt: skip
    eng = LLMEngine(cfg)
    ids = [p for _, p in prompt_set(eng, a.which)]
    batch = [ids[i % len(ids)] for i in range(a.streams)]
    schedule, held = eng.scheduler.schedule, []

    def logged():
        b = schedule()
        held.append(
            (b.num_prefill, b.num_decode, sum(len(i.draft_ids) for i in b.items), b.num_tokens)
        )
        return b

    eng.scheduler.schedule = logged  # type: ignore[method-assign]
    cuda = eng.runner.device.type == "cuda"
    for k in (int(x) for x in a.ks.split(",")):
        p = SamplingParams(max_tokens=a.gen, temperature=0.0, ignore_eos=True, spec_tokens=k)
        for rep in range(2):
            held.clear()
            steps = []
            for x in batch:
                eng.add_request(x, p)
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            while eng.has_work():
                s, n = time.perf_counter(), len(held)
                eng.step()
                steps.append((time.perf_counter() - s, held[n] if len(held) > n else None))
            if cuda:
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            slow = [(round(1e3 * s, 1), c) for s, c in sorted(steps, key=lambda x: -x[0])[:4]]
            print(f"k={k} rep={rep} {a.streams * a.gen / dt:.0f} tok/s, {len(steps)} steps, "
                  f"slowest (ms, (prefill, decode, drafts, tokens)): {slow}")  # fmt: skip


if __name__ == "__main__":
    main()
