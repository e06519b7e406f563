"""Step overlap: launch step N+1 before step N's tokens reach the host.

A decode step used to run: stage the inputs, replay the CUDA graph, wait for its token ids, then
update the sequences, detokenize, check stops, and schedule the next step, while the GPU idled.
At batch 1 that host time was ~13% of a step on one H100 (BENCHMARKS.md, session 9). Step N's
tokens can be made on the device: the graph's argmax for greedy rows, the sampler's draw
(penalties, temperature, top-k/p, min-p, seeded generators) for the others, enqueued without a
host sync. So the engine enqueues them, stages N+1 (positions, slots, block tables: all
known), copies N's tokens into N+1's input on the device, launches N+1, and only then waits
for N's tokens and does N's host work while N+1 runs. At most one step is in flight ahead of
the host.

What a step launched ahead cannot know, it does not guess: it is launched only when step N is a
plain decode step of every running sequence (no drafts, nobody waiting), none of whose rows
needs the host to pick its token (logprobs, a grammar), and when N cannot end a sequence by
length. N may also carry one chunk of a long prompt being prefilled beside the decodes (the
`--decode-prefill-chunk` tokens a step that keep the streams' latency low): the prompt's next
chunk is known, so N+1 carries it, unless it is the prompt's last (its first token goes out
through a plain step). Those mixed steps are the ones a long prompt adds to running streams'
inter-token gaps, and chaining them hides the host's work there too (H200, 8 streams beside an
8,000-token prompt: p99 gap 1.58x -> 1.50x the unloaded one, BENCHMARKS.md session 37).

A sequence that N ends otherwise (EOS, a stop string, an abort) got one token of wasted work
in N+1: its result is dropped (nothing is sampled for it), and its KV write went to a block
past its end that no prefix-cache entry holds. The sampler sees the same rows in the same
calls as without overlap, so it draws the same random numbers (seeded or not) and output is
token-identical, as far as the logits are: a dropped row changes the batch of one step, which
on a GPU may move the last bits of the other rows' logits.

A step that cannot chain (a verify step: the host takes its accepted drafts; rows with
logprobs) still hides part of the host's work: once its tokens are taken and the sequences
updated, the next step is proposed, scheduled and launched, and only then are the taken step's
events made (detokenize, stop strings, the events themselves) while the new one runs
(`LLMEngine._launchable` says when: nobody waiting, no grammar, no first token, stop id or
max_tokens among the step's tokens; a stop string found then drops its sequence's rows of the
step in flight, as above).

Pure Python: the rule `chainable`, used by LLMEngine; Scheduler.schedule_ahead builds step
N+1 and ModelRunner.execute(ids_from=...) launches it.
"""

from __future__ import annotations

from localllm.core import SeqStatus
from localllm.engine.scheduler_types import ScheduledBatch, ScheduledSeq


def chainable(batch: ScheduledBatch) -> bool:
    """Whether the step after `batch` may be launched before batch's tokens are known: plain
    decodes, optionally followed by one prefill chunk that samples nothing (a long prompt
    prefilled a chunk a step beside running streams: its next chunk is known)."""
    shape = decodes_then_chunk(batch)
    if shape is None or not shape[0]:
        return False
    decodes, chunk = shape
    for it in decodes:
        seq, p = it.seq, it.seq.params
        if not (it.needs_logits and it.num_tokens == 1) or it.draft_ids:
            return False
        if seq.status is not SeqStatus.RUNNING:
            return False
        if p.logprobs is not None or p.constraint is not None:  # the host picks its token
            return False
        if seq.num_output + 2 > p.max_tokens:  # batch's token may be its last
            return False
    return chunk is None or chunk.seq.status is SeqStatus.RUNNING


def decodes_then_chunk(
    batch: ScheduledBatch,
) -> tuple[list[ScheduledSeq], ScheduledSeq | None] | None:
    """(the decode items, the prefill chunk after them that samples nothing or None) when
    batch is only that; None for any other batch (a chunk that samples, several chunks)."""
    items = batch.items
    if all(it.is_decode for it in items):
        return items, None
    *decodes, last = items
    if last.is_decode or last.needs_logits or not all(it.is_decode for it in decodes):
        return None
    return decodes, last
