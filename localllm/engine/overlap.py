"""Step overlap: launch decode step N+1 before step N's tokens reach the host.

A decode step used to run: stage the inputs, replay the CUDA graph, wait for its token ids, then
update the sequences, detokenize, check stops, and schedule the next step, while the GPU idled.
At batch 1 that host time was ~13% of a step (BENCHMARKS.md, session 9). When every sequence of
step N takes the argmax computed on the device, step N+1's input ids are already there: the
engine stages N+1 (positions, slots, block tables: all known), copies N's ids into N+1's input
on the device, launches N+1, and only then waits for N's ids and does N's host work while N+1
runs. At most one step is in flight ahead of the host.

What a step launched ahead cannot know, it does not guess: it is launched only when step N is a
plain decode step of every running sequence (no drafts, no prefill chunk, nobody waiting),
whose rows are all greedy argmax rows without penalties, logprobs or grammar, and when N cannot
end a sequence by length. A sequence that N ends otherwise (EOS, a stop string, an abort) got
one token of wasted work in N+1: its result is dropped, and its KV write went to a block past
its end that no prefix-cache entry holds. Output is token-identical with and without overlap.

Pure Python: the rule `chainable`, used by LLMEngine; Scheduler.schedule_ahead builds step
N+1 and ModelRunner.execute(ids_from=...) launches it.
"""

from __future__ import annotations

from localllm.core import SeqStatus
from localllm.engine.scheduler_types import ScheduledBatch


def chainable(batch: ScheduledBatch) -> bool:
    """Whether the step after `batch` may be launched before batch's tokens are known."""
    if not batch.items:
        return False
    for it in batch.items:
        seq, p = it.seq, it.seq.params
        if not (it.is_decode and it.needs_logits and it.num_tokens == 1) or it.draft_ids:
            return False
        if seq.status is not SeqStatus.RUNNING:
            return False
        if not p.argmax_on_device or p.constraint is not None:
            return False
        if seq.num_output + 2 > p.max_tokens:  # batch's token may be its last
            return False
    return True
