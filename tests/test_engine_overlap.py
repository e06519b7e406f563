"""Step overlap (engine/overlap.py) on the CPU path, forced on: a decode step launched before
the previous step's tokens reach the host gives token-identical output to plain steps, with
sequences that end mid-chain (length, EOS, stop ids, stop strings), aborts and new requests
arriving while a step is in flight, sampled rows (the same draws), batches that cannot chain
(logprobs), n-gram speculation beside it, a clean prefix cache afterwards and no leaked
blocks."""

from __future__ import annotations

import random

import conftest
import pytest

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.block_manager import BlockManager
from localllm.engine.engine import LLMEngine
from localllm.engine.overlap import chainable
from localllm.engine.scheduler import Scheduler, SchedulerConfig

STORIES = ("models", "stories260K.gguf")


def _engine(overlap: str, spec: int = 0, **kw) -> LLMEngine:
    path = conftest.testdata_path(*kw.pop("model", STORIES))
    cfg = EngineConfig(model=str(path), device="cpu", block_size=8, spec_tokens=spec,
                       step_overlap=overlap, max_model_len=512, **kw)  # fmt: skip
    return LLMEngine(cfg)


@pytest.fixture(scope="module")
def off() -> LLMEngine:
    return _engine("off")


@pytest.fixture(scope="module")
def on() -> LLMEngine:
    return _engine("on")


def _prompts(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[1] + [rng.randrange(3, 512) for _ in range(rng.randint(1, 30))] for _ in range(n)]


def _blocks_back(eng: LLMEngine) -> bool:
    bm = eng.block_manager
    return bm.num_used_blocks == 0 and bm.num_free_blocks == bm.num_blocks


def _run(eng: LLMEngine, prompts: list[list[int]], params: list[SamplingParams]) -> list[tuple]:
    """(ids, text, finish reason) of each request, stepping the engine as the front ends do."""
    rids = [eng.add_request(p, sp) for p, sp in zip(prompts, params)]
    out = {r: ([], "", None) for r in rids}
    while eng.has_work():
        for ev in eng.step():
            ids, text, _ = out[ev.request_id]
            out[ev.request_id] = (ids + ev.token_ids, text + ev.text, ev.finish_reason)
    return [out[r] for r in rids]


def test_engine_option_defaults() -> None:
    assert _engine("auto").overlap is False  # no CUDA graphs on the CPU: nothing to hide
    assert EngineConfig(model="m").step_overlap_on(graphs=True)
    assert not EngineConfig(model="m", step_overlap="off").step_overlap_on(graphs=True)
    with pytest.raises(ValueError, match="--step-overlap"):
        EngineConfig(model="m", step_overlap="yes")


def test_greedy_identical_with_lengths_and_eos(off: LLMEngine, on: LLMEngine) -> None:
    """Different max_tokens end sequences at different steps (the batch changes mid-chain);
    EOS is honoured. 30 prompts in one batch, then one at a time."""
    prompts = _prompts(30)
    params = [SamplingParams(max_tokens=1 + (7 * i) % 48, temperature=0.0) for i in range(30)]
    ahead = on.stats.steps_ahead
    assert _run(on, prompts, params) == _run(off, prompts, params)
    assert on.stats.steps_ahead > ahead and off.stats.steps_ahead == 0
    for p, sp in zip(prompts[:4], params[:4]):
        assert _run(on, [p], [sp]) == _run(off, [p], [sp])
    assert _blocks_back(on) and _blocks_back(off)


def test_stops_mid_chain(off: LLMEngine, on: LLMEngine) -> None:
    """A stop token id and a stop string end a sequence at a step whose successor is already
    launched: the extra step's token is dropped, the text and finish reason are the same."""
    prompts = _prompts(6, seed=1)
    plain = [SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)] * 6
    ref = _run(off, prompts, plain)
    params = []
    for i, (ids, text, _) in enumerate(ref):
        if i % 2:
            params.append(SamplingParams(max_tokens=40, temperature=0.0, stop_token_ids=[ids[9]]))
        else:
            params.append(SamplingParams(max_tokens=40, temperature=0.0, stop=[text[12:16]]))
    got, want = _run(on, prompts, params), _run(off, prompts, params)
    assert got == want
    assert all(r == "stop" for _, _, r in got)
    assert _blocks_back(on)


def test_sampled_rows_chain_with_the_same_draws(off: LLMEngine, on: LLMEngine) -> None:
    """Sampled rows (seeded or not, penalties, top-k/p, min-p) draw their tokens on the
    device and chain: the sampler gets the same rows in the same calls as without overlap, so
    the outputs are identical, with sequences ending at different steps (EOS on)."""
    prompts = _prompts(6, seed=2)
    params = [
        SamplingParams(max_tokens=30, temperature=0.0),
        SamplingParams(max_tokens=24, temperature=0.9, seed=7),
        SamplingParams(max_tokens=30, temperature=0.8, top_p=0.9, top_k=40),  # unseeded
        SamplingParams(max_tokens=17, temperature=0.7, min_p=0.05, seed=3),
        SamplingParams(max_tokens=30, temperature=0.0, repetition_penalty=1.3),
        SamplingParams(max_tokens=28, temperature=1.0, frequency_penalty=0.5, seed=11),
    ]
    on.sampler._shared.manual_seed(5)
    off.sampler._shared.manual_seed(5)
    ahead = on.stats.steps_ahead
    assert _run(on, prompts, params) == _run(off, prompts, params)
    assert on.stats.steps_ahead > ahead + 10
    assert not on.sampler._seeded  # no generator revived for a finished sequence
    assert _blocks_back(on)


def test_logprobs_rows_do_not_chain(off: LLMEngine, on: LLMEngine) -> None:
    """A row whose logprobs the host computes takes plain steps (the whole batch does), with
    the same tokens and logprobs as without overlap."""
    prompts = _prompts(3, seed=5)
    params = [SamplingParams(max_tokens=20, temperature=0.0, logprobs=2)] + [
        SamplingParams(max_tokens=20, temperature=0.0)
    ] * 2
    ahead = on.stats.steps_ahead
    got = _run(on, prompts, params)
    assert on.stats.steps_ahead == ahead
    assert got == _run(off, prompts, params)


def test_abort_and_arrival_while_a_step_is_in_flight(off: LLMEngine, on: LLMEngine) -> None:
    prompts = _prompts(3, seed=3)
    sp = SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True)
    want = [_run(off, [p], [sp])[0][0] for p in prompts]
    a, b = on.add_request(prompts[0], sp), on.add_request(prompts[1], sp)
    got: dict[str, list[int]] = {a: [], b: []}
    while on._ahead is None or len(got[a]) < 5:  # decoding, a step launched ahead
        for ev in on.step():
            got[ev.request_id] += ev.token_ids
    on.abort(b)  # its step in flight must not come back
    c = on.add_request(prompts[2], sp)  # arrives while a step is in flight
    got[c] = []
    while on.has_work():
        for ev in on.step():
            assert ev.request_id != b
            got[ev.request_id] += ev.token_ids
    assert got[a] == want[0] and got[c] == want[2]
    assert got[b] == want[1][: len(got[b])]
    assert _blocks_back(on)


def test_prefix_cache_clean_after_a_sequence_ends_mid_chain(off: LLMEngine, on: LLMEngine) -> None:
    """The wasted step of a sequence that ended wrote K/V past its end: a later prompt that
    extends the finished one hits its cached blocks and must continue exactly as without
    overlap (no stale or wrong K/V cached)."""
    prompt = _prompts(1, seed=4)[0]
    sp = SamplingParams(max_tokens=37, temperature=0.0, ignore_eos=True)
    stop = _run(off, [prompt], [sp])[0][0][29]  # ends it mid-chain, at or before token 30
    first = _run(
        on, [prompt], [SamplingParams(max_tokens=37, temperature=0.0, stop_token_ids=[stop])]
    )
    longer = prompt + first[0][0] + [77, 78, 79]
    sp2 = SamplingParams(max_tokens=25, temperature=0.0, ignore_eos=True)
    hits = on.block_manager.hits
    assert _run(on, [longer], [sp2]) == _run(off, [longer], [sp2])
    assert on.block_manager.hits > hits  # it did reuse cached blocks


def test_speculation_beside_overlap() -> None:
    """Speculation on: a sequence chains only after QUIET_STEPS proposals without a draft
    (the speculator sees a step late whether one is coming), so grounded code keeps nearly all
    of its verified drafts; the output is the same as with overlap off."""
    model = ("models", "pycode-22m-q4_k_m.gguf")
    eng_on, eng_off = _engine("on", spec=4, model=model), _engine("off", spec=4, model=model)
    from localllm.bench.spec_prompts import code_prompts

    sp = SamplingParams(max_tokens=48, temperature=0.0, ignore_eos=True)
    for _, text in code_prompts()[:6]:  # one at a time: batch 1, where speculation pays
        p = eng_on.encode_prompt(text)
        assert _run(eng_on, [p], [sp]) == _run(eng_off, [p], [sp])
    on, off = eng_on.stats, eng_off.stats
    assert on.spec_accepted > 0 and on.steps_ahead > 0 and on.steps_early > 0, on
    assert off.steps_early == 0
    assert on.spec_accepted >= 0.95 * off.spec_accepted, (on.spec_accepted, off.spec_accepted)
    assert on.steps <= 1.05 * off.steps, (on.steps, off.steps)
    assert _blocks_back(eng_on)


@pytest.fixture(scope="module")
def code_engines() -> tuple[LLMEngine, LLMEngine]:
    """pycode-22m with speculation (k = 4), overlap on and off."""
    model = ("models", "pycode-22m-q4_k_m.gguf")
    return _engine("on", spec=4, model=model), _engine("off", spec=4, model=model)


def _code_prompts(eng: LLMEngine, n: int) -> list[list[int]]:
    from localllm.bench.spec_prompts import code_prompts

    return [eng.encode_prompt(text) for _, text in code_prompts()[:n]]


def test_verify_steps_launch_before_their_events(code_engines) -> None:
    """A verify step's successor is launched once its tokens are taken, before its events
    are made (`LLMEngine._launchable`): stop ids and max_tokens inside an accepted run keep
    the step serial, a stop string found while making the events ends its sequence with the
    next step in flight (dropped). Output, text and finish reasons are those of overlap off;
    no blocks leak."""
    on, off = code_engines
    prompts = _code_prompts(on, 4)
    free = [SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)] * 4
    ref = _run(off, prompts, free)
    params = [
        SamplingParams(max_tokens=40, temperature=0.0, stop_token_ids=[ref[0][0][17]]),
        SamplingParams(max_tokens=40, temperature=0.0, stop=[ref[1][1][30:34]]),
        SamplingParams(max_tokens=23, temperature=0.0, ignore_eos=True),  # ends mid-run
        SamplingParams(max_tokens=40, temperature=0.0, stop=["\n\n\n\n\n"]),  # never
    ]
    early = on.stats.steps_early
    for p, sp in zip(prompts, params):  # batch 1: verify steps back to back
        got, want = _run(on, [p], [sp]), _run(off, [p], [sp])
        assert got == want
    assert on.stats.steps_early > early
    assert _run(on, prompts, params) == _run(off, prompts, params)  # and as one batch
    assert _blocks_back(on) and _blocks_back(off)


def test_sampled_and_logprobs_verify_steps_launch_early(code_engines) -> None:
    """Sampled verify steps (seeded: the same draws on and off) and rows with logprobs (the
    host makes them; such a batch never chains) launch early with the same tokens,
    logprobs and text."""
    on, off = code_engines
    prompts = _code_prompts(on, 3)
    params = [
        SamplingParams(max_tokens=32, temperature=0.8, seed=5, ignore_eos=True),
        SamplingParams(max_tokens=32, temperature=0.0, logprobs=2, ignore_eos=True),
        SamplingParams(max_tokens=32, temperature=0.6, top_k=20, seed=9, ignore_eos=True),
    ]
    early = on.stats.steps_early
    for p, sp in zip(prompts, params):
        rid = on.add_request(p, sp)
        rid_off = off.add_request(p, sp)
        got = _events(on, rid)
        want = _events(off, rid_off)
        assert got == want
    assert on.stats.steps_early > early


def _events(eng: LLMEngine, rid: str) -> list[tuple]:
    """(ids, text, logprobs, finish reason) of each event of one request."""
    out = []
    while eng.has_work():
        for ev in eng.step():
            assert ev.request_id == rid
            lps = [(lp.token_id, round(lp.logprob, 4)) for lp in ev.logprobs or []]
            out.append((ev.token_ids, ev.text, lps, ev.finish_reason))
    return out


def test_launchable_rule(code_engines) -> None:
    """Nothing launches early while a request waits for admission, after a step in which a
    sequence takes its first token, a stop id or reaches max_tokens, nor beside a sequence
    whose grammar consumes the step's tokens."""
    from types import SimpleNamespace

    from localllm.structured.spec import ConstraintSpec

    on, _ = code_engines
    p = _code_prompts(on, 1)[0]
    rid = on.add_request(p, SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True))
    while not any(not s.in_prefill for s in on.scheduler.running):
        on.step()
    seq = on.scheduler.running[0]
    st = on.requests[rid]
    batch = SimpleNamespace(items=[SimpleNamespace(seq=seq, is_decode=True)])
    taken = {seq.seq_id: [seq.token_ids[-1]]}  # the step's tokens
    assert on._launchable(batch, taken)
    first = SimpleNamespace(items=[SimpleNamespace(seq=seq, is_decode=False)])
    assert not on._launchable(first, taken)  # a prompt's last chunk: its first token
    late = on.add_request([1, 2, 3], SamplingParams(max_tokens=2))
    assert not on._launchable(batch, taken)  # someone waits
    on.abort(late)
    assert on._launchable(batch, taken)
    ids = st.stop_ids
    st.stop_ids = ids | {seq.token_ids[-1]}
    assert not on._launchable(batch, taken)  # it takes a stop id
    st.stop_ids = ids
    params = seq.params
    seq.params = SamplingParams(max_tokens=seq.num_output, temperature=0.0)
    assert not on._launchable(batch, taken)  # it reached max_tokens
    seq.params = params
    g = on.add_request(
        p, SamplingParams(max_tokens=4, constraint=ConstraintSpec.grammar("[a-z]+", kind="regex"))
    )
    while on.scheduler.waiting:
        on.step()
    assert not on._launchable(batch, taken)  # a grammar runs beside it
    on.abort(g)
    on.abort(rid)
    while on.has_work():
        on.step()
    assert _blocks_back(on)


def test_quiet_needs_proposals_without_drafts() -> None:
    from localllm.core import SequenceState
    from localllm.engine.speculative.policy import QUIET_STEPS, SpecPolicy
    from localllm.engine.speculative.speculator import Speculator

    spec = Speculator(SpecPolicy(4, 2, 4, 8, 0.1, 0.0), 1024)
    params = SamplingParams(max_tokens=100, temperature=0.0)
    seq = SequenceState("r", [5, 6, 7, 8, 9, 10, 11, 12], params)
    assert not spec.quiet([seq], propose=False)  # nothing proposed yet
    for i in range(QUIET_STEPS - 1):
        assert not spec.quiet([seq], propose=True)  # misses 1 .. QUIET_STEPS - 1
        seq.token_ids.append(100 + i)
    assert spec.quiet([seq], propose=True)  # QUIET_STEPS proposals without a draft
    assert spec.quiet([seq], propose=False)
    seq.token_ids += [5, 6, 7]  # "5 6 7" occurred before: a draft (8, 9, ...) is found
    assert not spec.quiet([seq], propose=True)
    off = SequenceState("o", [1, 2], SamplingParams(max_tokens=9, temperature=0.0, spec_tokens=0))
    assert spec.quiet([off], propose=False)  # a sequence that does not speculate


def test_chainable_rule() -> None:
    bm = BlockManager(num_blocks=8, block_size=4, enable_prefix_caching=False)
    sched = Scheduler(SchedulerConfig(max_model_len=64), bm)
    from localllm.core import SequenceState

    seqs = [SequenceState(f"r{i}", [1, 2, 3], SamplingParams(max_tokens=4, temperature=0.0))
            for i in range(2)]  # fmt: skip
    for s in seqs:
        sched.add(s)
    batch = sched.schedule()  # prefill: not a decode step
    assert not chainable(batch)
    sched.update(batch, {s.seq_id: [9] for s in seqs})
    batch = sched.schedule()
    assert chainable(batch)  # 1 output, this step's makes 2, the next one 3 <= 4
    nxt = sched.schedule_ahead(batch)
    assert nxt is not None
    assert [(it.start, it.num_tokens) for it in nxt.items] == [(4, 1), (4, 1)]
    assert all(len(s.block_table) == 2 for s in seqs)  # position 4 starts a second block
    sched.update(batch, {s.seq_id: [9] for s in seqs})
    assert chainable(nxt)  # 2 outputs: nxt's token is the 3rd, the one after it the 4th
    sched.update(nxt, {s.seq_id: [9] for s in seqs})
    last = sched.schedule()
    assert not chainable(last)  # its token is the 4th and last: nothing comes after it
    seqs[0].params = SamplingParams(max_tokens=8, temperature=0.7, repetition_penalty=1.2)
    seqs[1].params = SamplingParams(max_tokens=8, temperature=0.0)
    assert chainable(last)  # a sampled row draws on the device too
    seqs[1].params = SamplingParams(max_tokens=8, temperature=0.0, logprobs=1)
    assert not chainable(last)  # its logprobs come from the host
    sched.add(SequenceState("late", [1], SamplingParams(max_tokens=2)))
    assert sched.schedule_ahead(last) is None  # someone waits for admission


def test_chainable_rule_with_a_prefill_chunk() -> None:
    """A long prompt prefilled `decode_prefill_chunk` tokens a step beside a decode: the mixed
    step chains, the step ahead carries the prompt's next chunk (sized as schedule() would),
    and the chunk that would be the prompt's last is left to a plain step."""
    from localllm.core import SequenceState

    bm = BlockManager(num_blocks=64, block_size=4, enable_prefix_caching=False)
    cfg = SchedulerConfig(max_model_len=128, decode_prefill_chunk=8, short_prefill=16)
    sched = Scheduler(cfg, bm)
    sp = SamplingParams(max_tokens=40, temperature=0.0)
    dec = SequenceState("d", [1, 2, 3], sp)
    sched.add(dec)
    sched.update(sched.schedule(), {dec.seq_id: [9]})
    long = SequenceState("p", list(range(1, 31)), sp)  # 30 tokens: chunks of 8, 8, 8, 6
    sched.add(long)
    batch = sched.schedule()
    assert [(it.start, it.num_tokens, it.is_decode) for it in batch.items] == [
        (3, 1, True), (0, 8, False)]  # fmt: skip
    assert chainable(batch)
    nxt = sched.schedule_ahead(batch)
    assert nxt is not None
    assert [(it.start, it.num_tokens, it.needs_logits) for it in nxt.items] == [
        (4, 1, True), (8, 8, False)]  # fmt: skip
    assert len(long.block_table) == 4  # 16 tokens
    sched.update(batch, {dec.seq_id: [9], long.seq_id: []})
    assert chainable(nxt)
    third = sched.schedule_ahead(nxt)
    assert third is not None and third.items[1].start == 16 and third.items[1].num_tokens == 8
    sched.update(nxt, {dec.seq_id: [9], long.seq_id: []})
    assert sched.schedule_ahead(third) is None  # the next chunk (24..30) is the last one
    sched.update(third, {dec.seq_id: [9], long.seq_id: []})
    final = sched.schedule()
    assert final.items[1].needs_logits and not chainable(final)  # a chunk that samples
    dec.params = SamplingParams(max_tokens=40, temperature=0.0, logprobs=1)
    assert not chainable(third)  # a decode the host samples still stops the chain


def test_mixed_steps_chain_with_identical_output() -> None:
    """Streams decoding while a long prompt prefills a chunk a step beside them (greedy and
    sampled rows): the mixed steps chain, every request's output (the long prompt's too) is
    the same as with overlap off, a later prompt that extends the long one reuses its cached
    blocks and continues identically, and every block comes back."""
    kw = dict(decode_prefill_chunk=16, max_num_batched_tokens=64)
    on, off = _engine("on", **kw), _engine("off", **kw)
    rng = random.Random(9)
    long_prompt = [1] + [rng.randrange(3, 512) for _ in range(299)]
    streams = _prompts(3, seed=9)
    params = [
        SamplingParams(max_tokens=60, temperature=0.0, ignore_eos=True),
        SamplingParams(max_tokens=60, temperature=0.8, seed=4, ignore_eos=True),
        SamplingParams(max_tokens=60, temperature=0.0, repetition_penalty=1.2, ignore_eos=True),
    ]
    long_sp = SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True)

    def run(eng: LLMEngine) -> tuple[list, int]:
        eng.sampler._shared.manual_seed(5)
        rids = [eng.add_request(p, sp) for p, sp in zip(streams, params)]
        out: dict[str, list[int]] = {r: [] for r in rids}
        for _ in range(4):  # the streams are decoding when the long prompt arrives
            for ev in eng.step():
                out[ev.request_id] += ev.token_ids
        lid = eng.add_request(long_prompt, long_sp)
        out[lid] = []
        mixed = ahead = 0  # steps while the long prompt prefills; of them, launched ahead
        while eng.has_work():
            in_prefill = lid in eng.requests and eng.requests[lid].seq.in_prefill
            before = eng.stats.steps_ahead
            for ev in eng.step():
                out[ev.request_id] += ev.token_ids
            mixed += in_prefill
            ahead += (eng.stats.steps_ahead - before) * in_prefill
        assert mixed >= 300 // 16  # prefilled 16 tokens a step beside the streams
        return [out[r] for r in [*rids, lid]], ahead

    got, ahead_on = run(on)
    want, ahead_off = run(off)
    assert got == want
    # every chunk but the first and the last went out ahead of the step before it
    assert ahead_off == 0 and ahead_on >= 300 // 16 - 2
    longer = long_prompt + got[-1] + [7, 8, 9]
    hits = on.block_manager.hits
    sp = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)
    assert _run(on, [longer], [sp]) == _run(off, [longer], [sp])
    assert on.block_manager.hits > hits
    assert _blocks_back(on) and _blocks_back(off)


def test_abort_and_arrival_during_chained_prefill() -> None:
    """While mixed steps chain, the long prompt is aborted with its next chunk in flight, and
    later a new request arrives: the streams' tokens equal those of overlap off, the aborted
    prompt gives no event after the abort, and every block comes back."""
    kw = dict(decode_prefill_chunk=16, max_num_batched_tokens=64)
    on, off = _engine("on", **kw), _engine("off", **kw)
    rng = random.Random(21)
    long_prompt = [1] + [rng.randrange(3, 512) for _ in range(299)]
    late = _prompts(1, seed=22)[0]
    streams = _prompts(2, seed=21)
    sp = SamplingParams(max_tokens=50, temperature=0.0, ignore_eos=True)

    def run(eng: LLMEngine) -> list[list[int]]:
        rids = [eng.add_request(p, sp) for p in streams]
        out: dict[str, list[int]] = {r: [] for r in rids}
        for _ in range(3):
            for ev in eng.step():
                out[ev.request_id] += ev.token_ids
        lid = eng.add_request(long_prompt, sp)
        for _ in range(6):  # the long prompt is 96 tokens into its prefill, a chunk in flight
            for ev in eng.step():
                out[ev.request_id] += ev.token_ids
        assert eng.requests[lid].seq.in_prefill
        if eng.overlap:  # its next chunk is on the device already
            assert eng._ahead is not None
            assert [it.is_decode for it in eng._ahead.batch.items] == [True, True, False]
        eng.abort(lid)
        for _ in range(2):
            for ev in eng.step():
                assert ev.request_id != lid
                out[ev.request_id] += ev.token_ids
        late_id = eng.add_request(late, sp)
        out[late_id] = []
        while eng.has_work():
            for ev in eng.step():
                assert ev.request_id != lid
                out[ev.request_id] += ev.token_ids
        return [out[r] for r in [*rids, late_id]]

    ahead = on.stats.steps_ahead
    assert run(on) == run(off)
    assert on.stats.steps_ahead > ahead
    assert _blocks_back(on) and _blocks_back(off)
