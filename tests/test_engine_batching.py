"""Continuous batching on the CPU path with stories260K: batching, prefix caching, preemption
and aborts never change what a request generates, and never leak a KV block."""

from __future__ import annotations

import random

import pytest

from localllm.config import PREFIX_CACHE_UNIT as UNIT
from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.engine.step_sampling import sample_step


def _engine(path, **kw) -> LLMEngine:
    kw.setdefault("max_num_seqs", 64)
    return LLMEngine(EngineConfig(model=str(path), device="cpu", **kw))


def _prompts(n: int, seed: int = 0) -> list[tuple[list[int], int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        plen = rng.randint(1, 60)
        out.append(([1] + [rng.randrange(3, 512) for _ in range(plen)], rng.randint(1, 40)))
    return out


def _alone(eng: LLMEngine, prompts) -> list[list[int]]:
    return [
        eng.generate([p], SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True))[0]
        for p, m in prompts
    ]


def _together(eng: LLMEngine, prompts) -> list[list[int]]:
    params = [SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True) for _, m in prompts]
    return eng.generate([p for p, _ in prompts], params)


def _all_blocks_free_or_cached(eng: LLMEngine) -> bool:
    bm = eng.block_manager
    return bm.num_used_blocks == 0 and bm.num_free_blocks == bm.num_blocks


@pytest.fixture
def stories(testdata):
    return testdata / "models" / "stories260K.gguf"


def test_64_concurrent_requests_match_running_alone(stories):
    prompts = _prompts(64)
    alone = _alone(_engine(stories, enable_prefix_caching=False), prompts)
    eng = _engine(stories, max_num_batched_tokens=256)  # forces chunked prefill beside decodes
    assert _together(eng, prompts) == alone
    assert _all_blocks_free_or_cached(eng)


@pytest.mark.parametrize("bs", [16, 64])
def test_prefix_cache_hit_equals_miss(stories, bs):
    rng = random.Random(3)
    shared = [1] + [rng.randrange(3, 512) for _ in range(89)]  # 90 tokens: 5 units of 16
    prompts = [(shared + [rng.randrange(3, 512) for _ in range(k)], 30) for k in (0, 1, 5, 17)]
    miss = _alone(_engine(stories, enable_prefix_caching=False, block_size=bs), prompts)
    eng = _engine(stories, block_size=bs)
    first = _alone(eng, prompts[:1])
    hit = _alone(eng, prompts)
    assert first[0] == miss[0] and hit == miss
    # every later prompt reused the shared prompt's whole units of 16 tokens, also where they
    # end inside a 64-token block (its leading tokens copied into the prompt's own block)
    assert eng.stats.cached_prompt_tokens >= len(prompts) * (len(shared) // UNIT * UNIT)
    assert _all_blocks_free_or_cached(eng)


@pytest.mark.parametrize("bs", [16, 64])
def test_multi_turn_reuses_previous_turn(stories, bs):
    eng = _engine(stories, block_size=bs)
    p = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    turn1 = [1] + list(range(10, 60))
    [out1] = eng.generate([turn1], p)
    turn2 = turn1 + out1 + list(range(100, 120))
    rid = eng.add_request(turn2, p)
    final, out2 = None, []
    while eng.has_work():
        for ev in eng.step():
            if ev.request_id == rid:
                out2 += ev.token_ids
                final = ev if ev.finished else final
    # every whole unit of turn 1 (prompt + answer, less its last token) came from the cache
    assert final.usage.cached_tokens == (len(turn1) + len(out1) - 1) // UNIT * UNIT > 0
    miss = _alone(_engine(stories, enable_prefix_caching=False, block_size=bs), [(turn2, 24)])
    assert out2 == miss[0]


def test_preemption_changes_no_output(stories):
    prompts = _prompts(12, seed=5)
    prompts = [(p, 60) for p, _ in prompts]
    alone = _alone(_engine(stories, enable_prefix_caching=False), prompts)
    # 24 blocks of 16 tokens cannot hold 12 sequences of up to ~120 tokens: the newest get preempted
    eng = _engine(stories, num_kv_blocks=24, max_model_len=256, enable_prefix_caching=False,
                  block_size=16)  # fmt: skip
    assert _together(eng, prompts) == alone
    assert eng.scheduler.num_preemptions > 0
    assert _all_blocks_free_or_cached(eng)


def test_abort_half_mid_stream_leaks_nothing(stories):
    eng = _engine(stories)
    prompts = _prompts(16, seed=9)
    ids = [
        eng.add_request(p, SamplingParams(max_tokens=50, temperature=0.0, ignore_eos=True))
        for p, _ in prompts
    ]
    for _ in range(5):
        eng.step()
    for rid in ids[::2]:
        ev = eng.abort(rid)
        assert ev is not None and ev.finish_reason == "abort"
    while eng.has_work():
        eng.step()
    assert not eng.requests
    assert _all_blocks_free_or_cached(eng)
    eng.block_manager.clear_cache()
    assert eng.block_manager.num_free_blocks == eng.block_manager.num_blocks


def test_seeded_sampling_is_batch_independent(stories):
    eng = _engine(stories)
    p = SamplingParams(max_tokens=30, temperature=0.9, top_p=0.95, seed=1234, ignore_eos=True)
    [alone] = eng.generate([[1, 400, 401]], p)
    others = [SamplingParams(max_tokens=30, temperature=1.0, ignore_eos=True) for _ in range(5)]
    outs = eng.generate([[1, 400, 401]] + [[1, 300 + i] for i in range(5)], [p] + others)
    assert outs[0] == alone


def test_context_overflow_is_refused(stories):
    from localllm.errors import RequestError

    eng = _engine(stories, max_model_len=64)
    with pytest.raises(RequestError) as e:
        eng.add_request([1] * 60, SamplingParams(max_tokens=10))
    assert e.value.code == "context_length_exceeded"
    assert "64" in str(e.value)


@pytest.mark.parametrize("ids", [[1, -1], [1, 512], [1, 10**6], [1, 2**70], [1, 2.0]])
def test_bad_token_ids_are_refused(stories, ids):
    """Prompt ids outside [0, vocab) or not integers: a clear error, nothing queued."""
    from localllm.errors import RequestError

    eng = _engine(stories)
    assert eng.model_cfg.vocab_size == 512
    with pytest.raises(RequestError, match=r"integers in \[0, 512\)"):
        eng.add_request(ids, SamplingParams(max_tokens=4))
    assert not eng.has_work()
    assert eng.generate([[1, 511]], SamplingParams(max_tokens=2, ignore_eos=True))[0]


def test_decode_prefill_chunk_caps_prefill_beside_decodes(stories):
    """With --decode-prefill-chunk, a step that decodes prefills at most that many tokens of
    long prompts (short ones are prefilled whole: they start streaming at once), and outputs
    do not change."""
    early = [([1, 5, 6, 7], 40), ([1, 9, 10], 40)]
    late = [
        ([1] + list(range(5, 95)), 20),
        ([1] + list(range(100, 250)), 20),
        ([1] + list(range(300, 330)), 8),
    ]
    alone = _alone(_engine(stories, enable_prefix_caching=False), early + late)
    eng = _engine(stories, decode_prefill_chunk=8)
    eng.scheduler.config.short_prefill = 64  # prompts over 64 tokens are long here
    seen: list[dict[int, int]] = []  # per decoding step: prompt length -> prefill tokens
    schedule = eng.scheduler.schedule

    def spy():
        b = schedule()
        if any(it.is_decode for it in b.items):
            seen.append({it.seq.num_tokens: it.num_tokens for it in b.items if not it.is_decode})
        return b

    eng.scheduler.schedule = spy
    greedy = lambda m: SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True)
    ids = [eng.add_request(p, greedy(m)) for p, m in early]
    out: dict[str, list[int]] = {i: [] for i in ids}
    for _ in range(3):
        for ev in eng.step():
            out[ev.request_id] += ev.token_ids
    ids += [eng.add_request(p, greedy(m)) for p, m in late]
    out.update({i: [] for i in ids[2:]})
    while eng.has_work():
        for ev in eng.step():
            out[ev.request_id] += ev.token_ids
    assert [out[i] for i in ids] == alone
    long_chunks = [n for step in seen for length, n in step.items() if length > 64]
    assert max(long_chunks) == 8  # the long prompts: 8 tokens at a time beside decodes
    assert all(sum(n for length, n in step.items() if length > 64) <= 8 for step in seen)
    assert any(step.get(31) == 31 for step in seen)  # the short one: whole, in one step


def test_device_greedy_ids_serve_greedy_rows_only(stories):
    """With a CUDA graph, the graph's argmax ids stand in for sampling for greedy rows without
    penalties or logprobs; otherwise the sampler runs on the logits. Driven here with a
    stand-in id tensor, so the two paths give visibly different ids."""

    eng = _engine(stories)
    plain = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    logp = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True, logprobs=2)
    assert plain.argmax_on_device and not logp.argmax_on_device
    assert not SamplingParams(temperature=0.0, repetition_penalty=1.2).argmax_on_device
    assert not SamplingParams(temperature=0.7).argmax_on_device
    for params, device_ids in ((plain, True), (logp, False)):
        eng.add_request([1, 5, 9], params)
        batch = eng.scheduler.schedule()
        out = eng.runner.execute(batch)
        stand_in = out.logits.argmin(dim=-1)  # not what greedy sampling would pick
        got = sample_step(eng.sampler, batch, out.logits, out.rows, stand_in).accepted
        want = stand_in if device_ids else out.logits.argmax(dim=-1)
        assert list(got.values()) == [[int(want[0])]]
        eng.scheduler.update(batch, got)
        eng._postprocess(batch, got)
        while eng.has_work():
            eng.step()
    assert _all_blocks_free_or_cached(eng)
