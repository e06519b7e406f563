"""LLMEngine: one step = schedule -> forward -> sample -> postprocess. Single-threaded.

AsyncEngine (async_engine.py) runs it in a background thread for the server and the chat UI.
"""

from __future__ import annotations

import logging
import time
import uuid
from array import array
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
import torch

from localllm.config import EngineConfig
from localllm.core import (
    SamplingParams,
    SeqStatus,
    SequenceState,
    TokenEvent,
    TokenLogprob,
    Usage,
)
from localllm.engine.block_manager import BlockManager
from localllm.engine.guided import GuidedDecoding, MaskJob
from localllm.engine.overlap import chainable
from localllm.engine.progress import LoadProgress, ProgressFn
from localllm.engine.runner import ModelRunner, StepOutput
from localllm.engine.sampler import Sampler
from localllm.engine.scheduler import ScheduledBatch, Scheduler, SchedulerConfig
from localllm.engine.speculative.calibrate import calibration_fits, engine_price
from localllm.engine.speculative.policy import (
    SpecPolicy,
    draft_limit,
    drafting_price,
    verify_price,
)
from localllm.engine.speculative.speculator import Speculator
from localllm.engine.stats import EngineSnapshot, EngineStats, request_stats
from localllm.engine.step_sampling import (
    HostIds,
    StepTokens,
    sample_step,
    taken_from_ids,
    tokens_on_device,
)
from localllm.engine.stop import StopStringBuffer
from localllm.errors import LocalLLMError, RequestError
from localllm.sources import open_model
from localllm.tokenizer import IncrementalDetokenizer

log = logging.getLogger("localllm")


@dataclass
class _Launched:
    """A step whose forward is on the device and whose tokens the host has not taken yet."""

    batch: ScheduledBatch
    out: StepOutput
    t0: float  # when it was scheduled
    masks: Future[MaskJob] | None = None  # grammar masks being computed for it
    ids: HostIds | None = None  # each item's token, drawn on the device, on its way to the host
    proposed: bool = False  # launched by `_launch`: the speculator proposed for it just before
    # the argmax ids' copy to the host, started at launch (off the path from one step's tokens
    # to the next launch): a step without grammar masks whose rows may take them
    greedy_ids: HostIds | None = None


def _running(
    batch: ScheduledBatch, rows: list[tuple[int, int]]
) -> tuple[ScheduledBatch, list[tuple[int, int]]]:
    """batch and its logits rows without the sequences that finished since it was scheduled
    (a step launched ahead of an EOS): nothing is sampled for them, no generator revived."""
    keep = [i for i, it in enumerate(batch.items) if it.seq.status is SeqStatus.RUNNING]
    if len(keep) == len(batch.items):
        return batch, rows
    return ScheduledBatch([batch.items[i] for i in keep]), [rows[i] for i in keep]


def _takes_argmax(batch: ScheduledBatch) -> bool:
    """Whether some item of batch may take its tokens from the device's argmax."""
    return any(it.needs_logits and it.seq.params.argmax_on_device for it in batch.items)


def _ids_in_range(ids: list[int], vocab: int) -> bool:
    """Whether every id is an integer in [0, vocab), through int64 numpy: over a 4,000-token
    prompt (on the path to its first token) 72 us against 178 for a generator over the ids and
    125 for Python's min and max (this sandbox's CPU)."""
    try:
        a = np.frombuffer(array("q", ids), dtype=np.int64)
    except (TypeError, OverflowError):  # a non-integer, or one past int64
        return False
    return int(a.min()) >= 0 and int(a.max()) < vocab


@dataclass
class _RequestState:
    seq: SequenceState
    detok: IncrementalDetokenizer
    stop: StopStringBuffer
    stop_ids: frozenset[int]
    logprobs: list[TokenLogprob] = field(default_factory=list)


class LLMEngine:
    def __init__(self, cfg: EngineConfig, progress: ProgressFn | None = None) -> None:
        """progress: gets one line per start-up stage (engine/progress.py; logged too)."""
        t0, report = time.perf_counter(), LoadProgress(progress)
        self.cfg = cfg
        report(f"reading {cfg.model}")
        self.source = open_model(cfg.model)  # a .gguf file or a Hugging Face folder
        self.model_cfg = self.source.config
        self.tokenizer = self.source.tokenizer
        self.chat_template = self.source.chat_template
        self.runner = ModelRunner(cfg, self.source.tensors, self.model_cfg, report)
        self.max_model_len = self.runner.max_model_len
        self.block_manager = BlockManager(
            self.runner.kv.num_blocks,
            cfg.block_size,
            cfg.enable_prefix_caching,
        )
        if self.block_manager.copies_slots:
            self.runner.load_slot_copy()
        self.scheduler = Scheduler(
            SchedulerConfig(
                cfg.max_num_seqs,
                cfg.max_num_batched_tokens,
                self.max_model_len,
                decode_prefill_chunk=cfg.decode_prefill_chunk_on(self.runner.device.type),
            ),
            self.block_manager,
        )
        self.sampler = Sampler(self.model_cfg.vocab_size, self.runner.device, seed=cfg.seed)
        k = cfg.spec_tokens_on(self.runner.device.type)
        fixed, per_draft = verify_price(self.runner.device.type)
        spec = SpecPolicy(
            k, cfg.spec_ngram_min, cfg.spec_ngram_max, cfg.spec_batch_cutoff, per_draft, fixed
        )
        self.speculator = Speculator(spec, self.max_model_len)
        self.guided = GuidedDecoding(
            self.tokenizer, self.model_cfg.vocab_size, self.runner.model.ops
        )
        self.requests: dict[str, _RequestState] = {}
        self.overlap = cfg.step_overlap_on(self.runner.graphs is not None)
        self._ahead: _Launched | None = None  # a decode step launched before the host needs it
        self.stats = EngineStats()
        self.closed = False
        if k and self.runner.graphs is not None and calibration_fits(k, self.max_model_len):
            report("pricing a verify step")
            self._price_verify_steps(k)
        log.info("engine ready in %.1f s", time.perf_counter() - t0)

    def _price_verify_steps(self, k: int) -> None:
        """Draft by this engine's measured (or cached) verify price (speculative/calibrate.py);
        when it cannot be measured, by the table."""
        spec = self.speculator.policy
        try:
            spec.cost_fixed, spec.cost_per_draft = drafting_price(*engine_price(self, k))
        except LocalLLMError as e:  # e.g. a KV pool too small for its sequence
            log.warning("could not measure a verify step (%s); drafting by the table", e)
        else:
            self._raise_draft_limit(k)
        self._forget_calibration()

    def _raise_draft_limit(self, k: int) -> None:
        """Without --spec-tokens, draft up to the limit the measured price pays for
        (policy.draft_limit), once its verify graphs are captured."""
        spec, graphs = self.speculator.policy, self.runner.graphs
        ceiling = self.cfg.spec_tokens_ceiling(self.runner.device.type)
        limit = min(draft_limit(spec.cost_fixed, spec.cost_per_draft, k), ceiling)
        if limit > k and graphs is not None and graphs.extend_verify(limit):
            spec.num_tokens = limit
            log.info("draft limit %d (the price pays for drafts past %d)", limit, k)

    def _forget_calibration(self) -> None:
        """Start-up measurements leave no trace: requests, counters, graph replays, prefix
        cache as new."""
        for request_id in list(self.requests):
            self.abort(request_id)
        self.stats = EngineStats()
        bm = self.block_manager
        bm.clear_cache()
        bm.hits = bm.queries = 0
        if self.runner.graphs is not None:
            self.runner.graphs.replays = dict.fromkeys(self.runner.graphs.replays, 0)

    # ---- lifetime -----------------------------------------------------------------------
    def close(self) -> None:
        """Abort every request and free the device memory this engine holds (KV pool, CUDA
        graphs, weights), so that another engine in the same process can size its pool from
        it. The engine cannot be used afterwards; closing twice is harmless."""
        if self.closed:
            return
        for request_id in list(self.requests):
            self.abort(request_id)
        self.closed = True
        self._ahead = None  # its sequences are aborted; runner.close() waits for the device
        self.guided.close()
        self.runner.close()

    def __enter__(self) -> LLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests -----------------------------------------------------------------------
    def add_request(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        request_id: str | None = None,
        continuation: bool = True,
    ) -> str:
        """Queue a request. continuation=True keeps the leading space of the first generated
        piece (a completion continuing its prompt); chat answers pass False. A constrained
        request always continues: its text is exactly the bytes its grammar accepted."""
        if self.closed:
            raise RequestError("the engine is closed")
        request_id = request_id or uuid.uuid4().hex
        if request_id in self.requests:
            raise RequestError(f"duplicate request id {request_id!r}")
        if not prompt_ids:
            raise RequestError("the prompt is empty", param="prompt")
        if not _ids_in_range(prompt_ids, self.model_cfg.vocab_size):
            raise RequestError(
                f"prompt token ids must be integers in [0, {self.model_cfg.vocab_size})",
                param="prompt",
            )
        seq = SequenceState(request_id, prompt_ids, params)
        if params.constraint is not None:
            self.guided.add(seq.seq_id, params.constraint)  # raises ConstraintError
            continuation = True
        try:
            self.scheduler.add(seq)  # raises context_length_exceeded
        except RequestError:
            self.guided.drop(seq.seq_id)
            raise
        stop_ids = frozenset(params.stop_token_ids) | (
            frozenset() if params.ignore_eos else self.tokenizer.stop_ids
        )
        self.requests[request_id] = _RequestState(
            seq,
            IncrementalDetokenizer(self.tokenizer, continuation=continuation),
            StopStringBuffer(params.stop),
            stop_ids,
        )
        self.stats.requests_received += 1
        log.debug("request %s: %d prompt tokens", request_id, len(prompt_ids))
        return request_id

    def abort(self, request_id: str) -> TokenEvent | None:
        st = self.requests.pop(request_id, None)
        if st is None:
            return None
        self.scheduler.abort(request_id)
        self._forget(st.seq)
        self.stats.requests_aborted += 1
        return self._final_event(st, "abort", "")

    @property
    def spec_tokens(self) -> int:
        """Draft tokens a request may verify per step unless it says otherwise (0: off)."""
        return self.speculator.policy.num_tokens

    def _forget(self, seq: SequenceState) -> None:
        self.sampler.forget(seq.seq_id)
        self.speculator.forget(seq.seq_id)
        self.guided.drop(seq.seq_id)

    def has_work(self) -> bool:
        return self.scheduler.has_unfinished() or self._ahead is not None

    def snapshot(self) -> EngineSnapshot:
        """Queues, KV pool occupancy, prefix-cache and engine counters (call on the engine's
        thread: `AsyncEngine.run_sync(LLMEngine.snapshot)`)."""
        return EngineSnapshot.of(self.scheduler, self.block_manager, self.stats)

    # ---- one step -----------------------------------------------------------------------
    @torch.inference_mode()
    def step(self) -> list[TokenEvent]:
        """Schedule and run one step and return its events. With step overlap (overlap.py)
        the next step may already be on the device when this returns; the next call
        finishes it."""
        if self.closed:
            return []
        if self._ahead is not None:
            cur, self._ahead = self._ahead, None
            if self.overlap and chainable(cur.batch):
                self._ahead = self._launch_ahead(cur, check_drafts=not cur.proposed)
            return self._finish(cur)
        launched, events = self._launch()
        if launched is None:
            return events
        return events + self._finish(launched)

    def _launch(self, ahead_too: bool = True) -> tuple[_Launched | None, list[TokenEvent]]:
        """Propose, schedule and launch a step: (the step, or None when nothing was
        scheduled; the events of sequences the scheduler ended). A plain decode step that can
        chain (overlap.chainable) is run with its argmax, and with ahead_too its successor is
        launched ahead now."""
        decoding = [s for s in self.scheduler.running if not s.in_prefill]
        self.speculator.propose(decoding)
        self.guided.cut_drafts(decoding)  # a draft token the grammar refuses is never verified
        batch = self.scheduler.schedule()
        ended = [self._end_by_scheduler(seq) for seq in batch.finished]
        events = [ev for ev in ended if ev is not None]
        if not batch.items:
            return None, events
        t0 = time.perf_counter()
        # grammar masks fill on a worker thread while the forward runs on the device
        masks = self.guided.start_masks(
            [(it.seq.seq_id, it.draft_ids) for it in batch.items if it.num_logits]
        )
        chain = self.overlap and chainable(batch)
        out = self.runner.execute(batch, greedy=chain)
        # while the forward runs: index the prompts being prefilled for their first drafts
        prefills = [it.seq for it in batch.items if not it.is_decode]
        self.speculator.prepare(prefills, len(self.scheduler.running))
        cur = _Launched(batch, out, t0, masks, proposed=True)
        if not chain and masks is None and out.greedy is not None and _takes_argmax(batch):
            cur.greedy_ids = HostIds(out.greedy)
        if chain and ahead_too:  # propose() has just run for them and found no drafts
            self._ahead = self._launch_ahead(cur, check_drafts=False)
        return cur, events

    def _launch_ahead(self, cur: _Launched, check_drafts: bool) -> _Launched | None:
        """Launch the step after `cur` (still on the device; overlap.chainable: the caller
        checked): its decodes, and the next chunk of a prompt in prefill, when no decoding
        sequence has been drafting lately (Speculator.quiet; check_drafts: make this step's
        proposal first, from the tokens before cur's: a step late). cur's tokens are drawn on
        the device and start their copy to the host first: the next replay of the same graph
        overwrites its logits and argmax."""
        out = cur.out
        assert out.greedy is not None, "a chainable step is run with its argmax"
        decoding = [it.seq for it in cur.batch.items if it.is_decode]
        if not self.speculator.quiet(decoding, propose=check_drafts):
            return None
        nxt = self.scheduler.schedule_ahead(cur.batch)
        if nxt is None:
            return None
        ids = tokens_on_device(self.sampler, cur.batch, out.logits, out.rows, out.greedy)
        cur.ids = HostIds(ids)
        nxt_out = self.runner.execute(nxt, greedy=True, ids_from=ids)
        self.stats.steps_ahead += 1
        # while it runs: index the prompt being prefilled, as `_launch` does
        prefills = [it.seq for it in nxt.items if not it.is_decode]
        self.speculator.prepare(prefills, len(self.scheduler.running))
        return _Launched(nxt, nxt_out, time.perf_counter())

    def _finish(self, cur: _Launched) -> list[TokenEvent]:
        """Wait for a launched step's tokens and apply them (`_settle`), then make its events
        (`_postprocess`). With step overlap, when nothing those events decide can change the
        next step (`_launchable`), the next step is launched in between: its forward
        runs while the host detokenizes, checks stops and hands out this step's events."""
        batch, accepted = self._settle(cur)
        ended: list[TokenEvent] = []  # none: `_launchable` leaves the scheduler none to end
        if self._ahead is None and self.overlap and self._launchable(batch, accepted):
            nxt, ended = self._launch(ahead_too=False)
            if nxt is not None:
                self._ahead = nxt
                self.stats.steps_early += 1
        return self._postprocess(batch, accepted) + ended

    def _launchable(self, batch: ScheduledBatch, accepted: dict[int, list[int]]) -> bool:
        """Whether the step after `batch` may be launched before batch's events are made:
        nobody is waiting (admission would see the blocks of sequences those events end), no
        running sequence follows a grammar (its masks need the tokens consumed) or is one the
        scheduler would end, and none of batch's sequences takes its first token (its event
        goes out at once: time to first token), a stop id or reaches max_tokens in these
        tokens. A stop string found while making the events ends its
        sequence with the next step in flight: that sequence's rows of it are dropped, as
        with a step launched ahead (overlap.py)."""
        sched = self.scheduler
        if sched.waiting:
            return False
        for seq in sched.running:
            if seq.seq_id in self.guided or sched.never_fits(seq):
                return False
        for it in batch.items:
            seq = it.seq
            new = accepted.get(seq.seq_id)
            st = self.requests.get(seq.request_id)
            if not new or st is None or seq.status is not SeqStatus.RUNNING:
                continue
            if not it.is_decode:  # a first token: its event goes out first (TTFT)
                return False
            if seq.num_output >= seq.params.max_tokens or any(t in st.stop_ids for t in new):
                return False
        return True

    def _settle(self, cur: _Launched) -> tuple[ScheduledBatch, dict[int, list[int]]]:
        """Wait for a launched step's tokens and apply them: sampling, acceptance, sequence
        updates. Sequences finished or aborted since its launch are skipped. Returns the batch
        that ran (without those) and each sequence's new tokens."""
        batch, out = cur.batch, cur.out
        if cur.ids is not None:  # its tokens were drawn on the device (step overlap)
            taken = taken_from_ids(batch, cur.ids)
        else:
            # sample only what still runs (a step launched ahead may hold a sequence that
            # ended since); a step with grammar masks is never launched ahead, and its rows
            # must stay aligned with the masks
            if cur.masks is None:
                batch, rows = _running(batch, out.rows)
                out = StepOutput(out.logits, rows, out.greedy)
            # masks the constrained rows on the device; their argmax joins the greedy ids
            rows_with_logits = [r for r in out.rows if r[1]]
            greedy = self.guided.apply(cur.masks, out.logits, rows_with_logits, out.greedy)
            taken = sample_step(self.sampler, batch, out.logits, out.rows, greedy, cur.greedy_ids)
        self._take(batch, taken)
        accepted = taken.accepted
        self.scheduler.update(batch, accepted)
        self.stats.record_step(time.perf_counter() - cur.t0)
        self.stats.preemptions = self.scheduler.num_preemptions
        return batch, accepted

    def _end_by_scheduler(self, seq: SequenceState) -> TokenEvent | None:
        """A sequence the scheduler finished itself (context full): flush its text."""
        st = self.requests.pop(seq.request_id, None)
        if st is None:
            return None
        self._forget(seq)
        self.stats.record_finished(seq)
        text = "" if st.stop.stopped else st.stop.feed(st.detok.flush())[0] + st.stop.flush()
        return self._final_event(st, seq.finish_reason or "length", text)

    def _take(self, batch: ScheduledBatch, taken: StepTokens) -> None:
        """Record logprobs and speculative counters of the tokens each sequence takes."""
        to_str = self.tokenizer.token_to_str
        for it in batch.items:
            seq = it.seq
            toks = taken.accepted.get(seq.seq_id) or []
            st = self.requests.get(seq.request_id)
            if seq.seq_id in taken.drafted:
                drafted, accepted = taken.drafted[seq.seq_id], len(toks) - 1
                self.speculator.observe(seq, drafted, accepted)
                self.stats.record_verify(drafted, accepted)
            lps = taken.logprobs.get(seq.seq_id)
            if st is None or lps is None or seq.params.logprobs is None:
                continue
            for tok, (lp, top) in zip(toks, lps):
                named = [(i, to_str(i), v) for i, v in top[: seq.params.logprobs]]
                st.logprobs.append(TokenLogprob(tok, to_str(tok), lp, named))

    # ---- postprocess --------------------------------------------------------------------
    def _postprocess(
        self, batch: ScheduledBatch, accepted: dict[int, list[int]]
    ) -> list[TokenEvent]:
        events = []
        now = time.monotonic()
        for it in batch.items:
            seq = it.seq
            new = accepted.get(seq.seq_id) or []
            st = self.requests.get(seq.request_id)
            if not new or st is None or seq.is_finished:
                continue
            if seq.first_token_time is None:
                seq.first_token_time = now
            seq.last_token_time = now
            ev = self._advance(st, new)
            if ev is not None:
                events.append(ev)
        return events

    def _advance(self, st: _RequestState, new: list[int]) -> TokenEvent | None:
        seq, p = st.seq, st.seq.params
        if not st.stop.stops and seq.seq_id not in self.guided:
            text, emitted, reason = self._take_run(st, new)
        else:
            text, emitted, reason = self._take_each(st, new)
        lps = None
        if p.logprobs is not None:  # _sample recorded one entry per new token
            lps = st.logprobs[len(st.logprobs) - len(new) :][: len(emitted)]
        if reason is None:
            return TokenEvent(seq.request_id, text, emitted, lps)
        if not st.stop.stopped:
            text += st.stop.feed(st.detok.flush())[0] + st.stop.flush()
        del seq.token_ids[seq.num_tokens - (len(new) - len(emitted)) :]  # drop tokens past the stop
        ev = self._final_event(st, reason, text, emitted, lps)
        self.scheduler.finish(seq, reason)
        self._forget(seq)
        self.requests.pop(seq.request_id, None)
        self.stats.record_finished(seq)
        return ev

    def _take_run(self, st: _RequestState, new: list[int]) -> tuple[str, list[int], str | None]:
        """(text, tokens emitted, finish reason) of a step's tokens without stop strings or a
        grammar: only stop ids and max_tokens end the run, so it is detokenized in one call
        (a verify step's run of accepted drafts), as `_take_each` would token by token."""
        seq = st.seq
        before = seq.num_output - len(new)  # output tokens before this step's
        limit = max(seq.params.max_tokens - before, 1)  # tokens up to the one reaching it
        n = min(len(new), limit)
        stop = next((i for i, tok in enumerate(new[:n]) if tok in st.stop_ids), None)
        if stop is not None:  # the stop token is emitted, not rendered
            return st.detok.add(new[:stop]), new[: stop + 1], "stop"
        text = st.detok.add(new[:n])
        return text, new[:n], "length" if before + n >= seq.params.max_tokens else None

    def _take_each(self, st: _RequestState, new: list[int]) -> tuple[str, list[int], str | None]:
        """(text, tokens emitted, finish reason) of a step's tokens, token by token: stop ids,
        stop strings, the grammar's end and max_tokens."""
        seq, p = st.seq, st.seq.params
        text, emitted, reason = "", [], None
        for tok in new:
            emitted.append(tok)
            if tok in st.stop_ids:
                reason = "stop"
                break
            piece, stopped = st.stop.feed(st.detok.add([tok]))
            text += piece
            if stopped or self.guided.accept(seq.seq_id, tok):  # accept: the grammar is done
                reason = "stop"
                break
            # add_request checked prompt + max_tokens <= max_model_len (core.check_context)
            if seq.num_output - (len(new) - len(emitted)) >= p.max_tokens:
                reason = "length"
                break
        return text, emitted, reason

    def _final_event(
        self,
        st: _RequestState,
        reason: str,
        text: str,
        ids: list[int] | None = None,
        lps: list[TokenLogprob] | None = None,
    ) -> TokenEvent:
        seq = st.seq
        usage = Usage(
            seq.prompt_len,
            seq.num_output,
            seq.num_cached_prompt,
            seq.spec_proposed,
            seq.spec_accepted,
        )
        log.debug("request %s %s: %s", seq.request_id, reason, usage)
        return TokenEvent(
            seq.request_id, text, ids or [], lps, reason, usage, stats=request_stats(seq)
        )

    # ---- conveniences -------------------------------------------------------------------
    def encode_prompt(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special=True, parse_special=True)

    def generate(
        self, prompts: list[list[int]], params: SamplingParams | list[SamplingParams]
    ) -> list[list[int]]:
        """Run prompts to completion (tests, bench): returns the generated ids of each."""
        plist = params if isinstance(params, list) else [params] * len(prompts)
        ids = [self.add_request(p, sp) for p, sp in zip(prompts, plist)]
        out: dict[str, list[int]] = {i: [] for i in ids}
        while self.has_work():
            for ev in self.step():
                out[ev.request_id] += ev.token_ids
        return [out[i] for i in ids]
