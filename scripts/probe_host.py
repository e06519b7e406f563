"""The host (Python) work of an engine step with the device work stubbed out (no GPU needed).

`runner.execute` is replaced by the CPU input build (`runner.prepare`, standing in for the
CUDA graph's input staging) and a fixed StepOutput whose greedy ids play the decode graph's
argmax, so each step runs what a greedy CUDA-graph step runs on the host: propose, schedule,
take, scheduler update, detokenize, stop checks, events. What this leaves out of a GPU step:
the graph launch, the input and id copies and the wait for the device; a GPU step's host gap
(`scripts/probe_pdl.py`: engine step minus graph replay) beyond this figure is theirs.

Usage: python3 scripts/probe_host.py [--model stories260K.gguf] [--batch 1] [--steps 2000]
       [--profile]
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
    ap.add_argument("--profile", action="store_true", help="cProfile 500 more steps")
    a = ap.parse_args()
    eng = LLMEngine(EngineConfig(model=a.model, device="cpu", max_model_len=a.steps + 1024,
                                 max_num_seqs=max(a.batch, 1), spec_tokens=0, threads=1))  # fmt: skip
    vocab = eng.tokenizer.vocab_size
    logits = torch.zeros(a.batch, vocab)
    greedy = torch.full((a.batch,), min(300, vocab - 1), dtype=torch.int64)

    def execute(batch: ScheduledBatch) -> StepOutput:
        eng.runner.prepare(batch)
        return StepOutput(logits, [(i, 1) for i in range(len(batch.items))], greedy)

    eng.runner.execute = execute  # type: ignore[method-assign]
    params = SamplingParams(max_tokens=a.steps + 600, temperature=0.0, ignore_eos=True)
    for i in range(a.batch):
        eng.add_request([eng.tokenizer.bos_id or 1, 100 + i, 200], params)
    for _ in range(50):
        eng.step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        eng.step()
    step = (time.perf_counter() - t0) / a.steps
    print(f"batch {a.batch}: host work of a greedy decode step {1e6 * step:.1f} us "
          f"({a.steps} steps, device work stubbed)")  # fmt: skip
    if a.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(500):
            eng.step()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
