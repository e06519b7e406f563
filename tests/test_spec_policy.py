"""Speculation policy: cost model, per-sequence adaptivity, batch cutoff, request limits."""

from __future__ import annotations

import pytest

from localllm.core import SamplingParams, SequenceState
from localllm.engine.speculative.policy import (
    GPU_DEFAULT_SPEC_TOKENS,
    MAX_SPEC_TOKENS,
    Acceptance,
    SpecPolicy,
    best_draft_len,
    draft_limit,
    drafting_price,
    expected_tokens,
    verify_cost,
    verify_price,
)
from localllm.engine.speculative.speculator import Speculator
from localllm.errors import RequestError

REPEAT = [5, 6, 7, 8, 9, 10, 11, 12] * 4  # a prompt whose continuation is predictable


def seq(prompt: list[int], **kw: object) -> SequenceState:
    return SequenceState(
        "r", list(prompt), SamplingParams(max_tokens=kw.pop("max_tokens", 64), **kw)
    )  # type: ignore[arg-type]


def test_expected_tokens_and_the_best_draft_length() -> None:
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert expected_tokens(0.5, 1) == pytest.approx(1.5)
    assert best_draft_len(0.05, 8) == 0  # nothing pays for the verify rows
    cheap = {"per_draft": 0.05, "fixed": 0.0}  # rows nearly free: the length follows acceptance
    assert 1 <= best_draft_len(0.5, 8, **cheap) < best_draft_len(0.95, 8, **cheap) <= 8
    assert best_draft_len(0.9, 8, per_draft=1.0) == 0  # rows as dear as a step: never
    # the measured GPU price (k = 4: 1.58x a batch-1 step, k = 8: 2.12x): unlikely drafts do
    # not pay, even drafts are short at 50% acceptance and long when most are accepted
    fixed, per_draft = verify_price("cuda")
    gpu = {"per_draft": per_draft, "fixed": fixed}
    assert best_draft_len(0.2, 8, **gpu) == 0
    assert 1 <= best_draft_len(0.5, 8, **gpu) <= 3
    assert best_draft_len(0.9, 8, **gpu) >= 6
    assert verify_cost(4, **gpu) == pytest.approx(1.58, abs=1e-2)
    assert verify_cost(8, **gpu) == pytest.approx(2.12, abs=1e-2)


def test_draft_limit_follows_the_measured_price() -> None:
    """Without --spec-tokens a GPU engine raises its draft limit from 8 as far as its measured
    price pays: a price that is mostly fixed (a small model's host time) pays for the most
    drafts, the 8B's dear rows keep 8, and nothing goes below the start or above 15."""
    small = drafting_price(0.95, 0.04)  # pycode-22m, measured (BENCHMARKS session 23)
    tiny = drafting_price(0.23, 0.01)  # SmolLM2-135M
    big = drafting_price(0.07, 0.2275)  # llama3-8b-q4_k_m
    assert draft_limit(*small) == draft_limit(*tiny) == MAX_SPEC_TOKENS
    assert draft_limit(*big) == GPU_DEFAULT_SPEC_TOKENS
    assert draft_limit(*drafting_price(0.3, 0.1)) in range(9, MAX_SPEC_TOKENS)  # in between
    assert draft_limit(0.0, 5.0) == GPU_DEFAULT_SPEC_TOKENS  # never below where it starts
    assert draft_limit(0.0, 5.0, lo=3) == 3
    assert draft_limit(*small, lo=MAX_SPEC_TOKENS) == MAX_SPEC_TOKENS


def test_draft_limit_ceiling_only_without_the_flag() -> None:
    from localllm.config import EngineConfig

    assert EngineConfig(model="m").spec_tokens_ceiling("cuda") == MAX_SPEC_TOKENS
    assert EngineConfig(model="m").spec_tokens_ceiling("cpu") == 0
    assert EngineConfig(model="m", spec_tokens=8).spec_tokens_ceiling("cuda") == 8
    assert EngineConfig(model="m", spec_tokens=0).spec_tokens_ceiling("cuda") == 0
    assert EngineConfig(model="m", spec_tokens=3).spec_tokens_ceiling("cpu") == 3


def test_acceptance_counts_only_tried_positions_and_decays() -> None:
    a = Acceptance()
    a.observe(4, 4)
    high = a.rate
    a.observe(8, 0)  # one position tried (and missed); the 7 after it were never tried
    assert a.tried == pytest.approx((2 * 0.85 + 4) * 0.85 + 1)
    assert a.rate < high
    for _ in range(30):
        a.observe(4, 0)
    assert a.rate < 0.05


def test_speculator_drafts_on_repeats_and_stops_after_misses() -> None:
    spec = Speculator(SpecPolicy(num_tokens=4), max_model_len=1000)
    s = seq(REPEAT)
    spec.propose([s])
    assert s.draft_ids == [5, 6, 7, 8][: len(s.draft_ids)] and len(s.draft_ids) >= 2
    for _ in range(12):  # every draft rejected: acceptance falls and drafting stops
        spec.observe(s, len(s.draft_ids), 0)
        s.token_ids.append(99)
        s.token_ids += REPEAT[:4]
        spec.propose([s])
        if not s.draft_ids:
            break
    assert s.draft_ids == []
    assert s.spec_proposed > 0 and s.spec_accepted == 0


def test_shadow_drafts_bring_a_paused_sequence_back() -> None:
    spec = Speculator(SpecPolicy(num_tokens=4), max_model_len=1000)
    s = seq(REPEAT)
    st = spec._state(s)
    st.acceptance.accepted, st.acceptance.tried = 0.0, 50.0  # paused by past misses
    resumed_after = None
    for step in range(40):
        spec.propose([s])
        if s.draft_ids:
            resumed_after = step
            break
        nxt = REPEAT[(len(s.token_ids)) % 8]
        s.token_ids.append(nxt)  # the model keeps repeating: shadow guesses are right
    assert resumed_after is not None and resumed_after > 2
    assert s.spec_proposed == 0  # shadows cost no verification


def test_batch_cutoff_and_limits() -> None:
    spec = Speculator(SpecPolicy(num_tokens=4, max_batch=2), max_model_len=1000)
    seqs = [seq(REPEAT) for _ in range(3)]
    spec.propose(seqs)
    assert all(s.draft_ids == [] for s in seqs)  # 3 decoding > 2: nobody speculates
    spec.propose(seqs[:2])
    assert all(s.draft_ids for s in seqs[:2])
    near_end = seq(REPEAT, max_tokens=3)
    near_end.token_ids += [5, 6]  # 2 of 3 tokens out: one more step, no room for drafts
    spec.propose([near_end])
    assert near_end.draft_ids == []
    ctx = Speculator(SpecPolicy(num_tokens=4), max_model_len=len(REPEAT) + 2)
    s = seq(REPEAT)
    ctx.propose([s])
    assert len(s.draft_ids) <= 2  # draft positions stay inside the context


def test_request_overrides() -> None:
    spec = Speculator(SpecPolicy(num_tokens=0), max_model_len=1000)
    off, on = seq(REPEAT), seq(REPEAT, spec_tokens=3)
    spec.propose([off, on])
    assert off.draft_ids == [] and 1 <= len(on.draft_ids) <= 3
    spec.policy.num_tokens = 4
    seeded, asked = seq(REPEAT, seed=3), seq(REPEAT, seed=3, spec_tokens=2)
    greedy_seeded = seq(REPEAT, seed=3, temperature=0.0)
    spec.propose([seeded, asked, greedy_seeded])
    assert seeded.draft_ids == [] and asked.draft_ids and greedy_seeded.draft_ids
    picky = seq(REPEAT, spec_tokens=4, spec_min_tokens=5)
    spec.propose([picky])
    assert picky.draft_ids == []  # proposals shorter than n_min are not verified
    spec.forget(on.seq_id)
    assert on.seq_id not in spec._states
    with pytest.raises(RequestError, match="n_max"):
        SamplingParams(spec_tokens=99)
    with pytest.raises(RequestError, match="n_min"):
        SamplingParams(spec_min_tokens=-1)
    with pytest.raises(ValueError, match="ngram"):
        SpecPolicy(num_tokens=2, ngram_min=3, ngram_max=2)
