"""The host (Python) work of an engine step with the device work stubbed out (no GPU needed).

`runner.execute` is replaced by the CPU input build (`runner.prepare`, standing in for the
CUDA graph's input staging) and a fixed StepOutput whose greedy ids play the decode graph's
argmax, so each step runs what a greedy CUDA-graph step runs on the host: propose, schedule,
take, scheduler update, detokenize, stop checks, events. What this leaves out of a GPU step:
the graph launch, the input and id copies and the wait for the device; a GPU step's host gap
(`scripts/probe_pdl.py`: engine step minus graph replay) beyond this figure is theirs.

With `--spec-tokens K` the stub's argmax continues a repeating prompt, so every draft is
accepted: each step is a verify step of K drafts (after the policy's ramp-up), as on grounded
text that repeats its prompt.

Usage: python3 scripts/probe_host.py [--model stories260K.gguf] [--batch 1] [--steps 2000]
       [--spec-tokens 0] [--profile [cumulative]]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

import torch

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.engine.runner import StepOutput
from localllm.engine.scheduler_types import ScheduledBatch

TESTDATA = os.environ.get("LOCALLLM_TESTDATA", os.path.join("..", "shared", "testdata"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(TESTDATA, "models", "stories260K.gguf"))
    ap.add_argument("--batch", type=int, default=1, help="decoding streams")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--spec-tokens", type=int, default=0, help="drafts per verify step (0: off)")
    ap.add_argument(
        "--profile",
        nargs="?",
        const="tottime",
        choices=("tottime", "cumulative"),
        help="cProfile 500 more steps, by own time or with callees (where a step goes)",
    )
    a = ap.parse_args()
    k = a.spec_tokens
    tokens = (a.steps + 600) * (k + 1)  # what every request may generate
    eng = LLMEngine(EngineConfig(model=a.model, device="cpu", max_model_len=tokens + 1024,
                                 max_num_seqs=max(a.batch, 1), spec_tokens=k, threads=1,
                                 spec_max_batch=max(a.batch, 1)))  # fmt: skip
    vocab = eng.tokenizer.vocab_size
    period = [min(300 + j, vocab - 1) for j in range(40)]  # the prompt repeats it

    def execute(batch: ScheduledBatch, greedy: bool = False, ids_from: object = None) -> StepOutput:
        eng.runner.prepare(batch)
        rows, ids = [], []
        for it in batch.items:  # the argmax of each row continues the period
            n = 1 + len(it.draft_ids)
            rows.append((len(ids), n))
            ids += [period[(it.seq.num_tokens + j) % len(period)] for j in range(n)]
        return StepOutput(torch.zeros(len(ids), vocab), rows, torch.tensor(ids))

    eng.runner.execute = execute  # type: ignore[method-assign]
    params = SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True)
    for i in range(a.batch):  # the prompt's phase differs per stream
        eng.add_request([period[(i + j) % len(period)] for j in range(3 * len(period))], params)
    for _ in range(50):
        eng.step()

    def out() -> int:
        return sum(st.seq.num_output for st in eng.requests.values())

    t0, before = time.perf_counter(), out()
    for _ in range(a.steps):
        eng.step()
    step = (time.perf_counter() - t0) / a.steps
    per_step = (out() - before) / a.steps / max(a.batch, 1)
    kind = f"verify step ({k} drafts)" if k else "decode step"
    print(f"batch {a.batch}: host work of a greedy {kind} {1e6 * step:.1f} us, "
          f"{per_step:.2f} tokens per sequence ({a.steps} steps, device work stubbed)")  # fmt: skip
    if a.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(500):
            eng.step()
        prof.disable()
        pstats.Stats(prof).sort_stats(a.profile).print_stats(20 if a.profile == "tottime" else 40)


if __name__ == "__main__":
    main()
