"""N-gram speculation end to end on the CPU path with real models: greedy output identical
with it on and off (grounded and open prompts, mixed batches), the same sampled distribution,
exact continuation after rejections (no stale KV, clean prefix cache) and no leaked blocks."""

from __future__ import annotations

import random
from collections import Counter

import conftest
import pytest
from scipy.stats import chi2_contingency

from localllm.bench.spec_prompts import chat_prompts, code_prompts, story_prompts
from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine


def _engine(path, **kw) -> LLMEngine:
    kw.setdefault("max_model_len", 1024)
    kw.setdefault("spec_max_batch", 128)  # tests batch everything: keep speculating
    return LLMEngine(EngineConfig(model=str(path), device="cpu", spec_tokens=4, **kw))


def _greedy(n: int, spec: int | None, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True, spec_tokens=spec, **kw)


def _blocks_back(eng: LLMEngine) -> bool:
    bm = eng.block_manager
    return bm.num_used_blocks == 0 and bm.num_free_blocks == bm.num_blocks


def _check_on_equals_off(
    eng: LLMEngine, prompts: list[list[int]], n: int, min_rate: float = 0.3
) -> None:
    """All prompts in one batch: off (spec 0), then on with every third one plain."""
    off = eng.generate(prompts, [_greedy(n, 0) for _ in prompts])
    before = (eng.stats.spec_proposed, eng.stats.spec_accepted)
    on = eng.generate(prompts, [_greedy(n, 0 if i % 3 == 2 else 4) for i in range(len(prompts))])
    for i, (a, b) in enumerate(zip(off, on)):
        assert a == b, (
            f"prompt {i}: spec on diverged at {next(j for j, (x, y) in enumerate(zip(a, b)) if x != y)}"
        )
    drafted = eng.stats.spec_proposed - before[0]
    accepted = eng.stats.spec_accepted - before[1]
    assert accepted > min_rate * drafted > 0, (drafted, accepted)  # really verified and accepted
    assert accepted < drafted  # and rejections happened too
    assert _blocks_back(eng)


def _encode(eng: LLMEngine, prompts: list[tuple[str, str]], chat: bool) -> list[list[int]]:
    out = []
    for _, text in prompts:
        if chat:
            msgs = [{"role": "user", "content": text}]
            rendered = eng.chat_template.render(msgs, add_generation_prompt=True)
            out.append(
                eng.tokenizer.encode(rendered, add_special=not eng.chat_template.renders_bos)
            )
        else:
            out.append(eng.encode_prompt(text))
    return out


def test_stories_greedy_identical_on_and_off() -> None:
    eng = _engine(conftest.testdata_path("models", "stories260K.gguf"), block_size=8)
    prompts = _encode(eng, story_prompts(), chat=False)
    rng = random.Random(0)
    for _ in range(12):  # random prompts: drafts come from the model's own repetitions
        prompts.append([1] + [rng.randrange(3, 512) for _ in range(rng.randint(2, 40))])
    _check_on_equals_off(eng, prompts, 40)


def test_pycode_greedy_identical_on_and_off() -> None:
    eng = _engine(conftest.testdata_path("models", "pycode-22m-q4_k_m.gguf"))
    prompts = _encode(eng, code_prompts(), chat=False)
    prompts += [p[: len(p) // 2 + 3] for p in prompts[:6]]  # cut mid-line: other continuations
    _check_on_equals_off(eng, prompts, 24)


def test_smollm2_greedy_identical_on_and_off() -> None:
    eng = _engine(conftest.smollm2_path())
    _check_on_equals_off(eng, _encode(eng, chat_prompts(), chat=True), 12)


@pytest.fixture(scope="module")
def stories():
    return _engine(conftest.testdata_path("models", "stories260K.gguf"), block_size=8)


REPEAT = "Lily saw a red ball. Lily was happy. Lily played with a red ball all day. " * 2


def _indexed_at_first_proposal(eng: LLMEngine) -> dict[int, tuple[int, int | None]]:
    """Filled as eng runs: seq_id -> (its outputs, its n-gram index's length or None) when the
    speculator first proposes for it."""
    real, first = eng.speculator.propose, {}

    def propose(decodes):
        decodes = list(decodes)
        for s in decodes:
            st = eng.speculator._states.get(s.seq_id)
            first.setdefault(s.seq_id, (s.num_output, len(st.index) if st else None))
        real(decodes)

    eng.speculator.propose = propose
    return first


def test_prompts_are_indexed_while_they_prefill(stories) -> None:
    """A speculating request's prompt is in its n-gram index before its first decode step
    proposes (indexed in the prefill step, while the forward runs); a request that does not
    speculate is never indexed, nor is any while more sequences run than speculate at once;
    the output is the same."""
    eng = stories
    prompt = eng.encode_prompt(REPEAT + "Lily saw")
    ref = eng.generate([prompt], _greedy(8, 0))[0]
    real = eng.speculator.propose
    first = _indexed_at_first_proposal(eng)
    try:
        got = eng.generate([prompt, prompt], [_greedy(8, 4), _greedy(8, 0)])
    finally:
        eng.speculator.propose = real
    assert got == [ref, ref]
    assert set(first.values()) == {(1, None), (1, len(prompt))}
    wide = _engine(conftest.testdata_path("models", "stories260K.gguf"), spec_max_batch=1)
    first = _indexed_at_first_proposal(wide)
    assert wide.generate([prompt, prompt], _greedy(8, 4)) == [ref, ref]
    assert list(first.values()) == [(1, None), (1, None)] and wide.stats.spec_proposed == 0


def test_rejections_continue_exactly_and_cache_holds_only_committed_kv(stories) -> None:
    """Drafts forced wrong at varying depths: output unchanged; the committed sequence then
    served from the prefix cache continues exactly as on a cold engine."""
    eng = stories
    prompt = eng.encode_prompt(REPEAT + "Lily saw")
    ref = eng.generate([prompt], _greedy(48, 0))[0]
    real = eng.speculator.propose
    calls = Counter()

    def propose(decodes):  # the true continuation with one wrong token at a moving position
        decodes = list(decodes)
        real(decodes)
        for s in decodes:
            done = s.num_output
            truth = ref[done : done + 5]
            if len(truth) > 1:
                bad = (calls["n"] % len(truth)) + 1
                s.draft_ids = truth[: bad - 1] + [(truth[bad - 1] + 1) % 512] + truth[bad:]
                calls["n"] += 1

    eng.speculator.propose = propose
    try:
        got = eng.generate([prompt], _greedy(48, 4))[0]
    finally:
        eng.speculator.propose = real
    assert got == ref and calls["n"] > 5
    assert _blocks_back(eng)
    full = prompt + ref
    warm = eng.generate([full], _greedy(12, 0))[0]
    assert eng.block_manager.num_cached_blocks > 0
    cold = _engine(
        conftest.testdata_path("models", "stories260K.gguf"), enable_prefix_caching=False
    )
    assert warm == cold.generate([full], _greedy(12, 0))[0]


def test_stop_strings_eos_max_tokens_logprobs_and_penalties_inside_runs(stories) -> None:
    eng = stories
    prompt = eng.encode_prompt(REPEAT + "Lily saw")
    # the prompt's blocks into the prefix cache first, so both runs of every case meet the same
    # cache (run alone, the first case's run without drafts prefilled cold, the other hit it)
    eng.add_request(prompt, SamplingParams(temperature=0.0, max_tokens=1))
    while eng.has_work():
        eng.step()
    cases = [
        dict(stop=["happy"]),
        dict(stop=[". Lily p"]),
        dict(max_tokens=7),
        dict(logprobs=2),
        dict(repetition_penalty=1.3),
        dict(frequency_penalty=0.5, presence_penalty=0.3),
    ]
    for kw in cases:
        kw.setdefault("max_tokens", 30)
        events = {}
        for spec in (0, 4):
            params = SamplingParams(temperature=0.0, spec_tokens=spec, **kw)
            rid = eng.add_request(prompt, params)
            evs = []
            while eng.has_work():
                evs += [ev for ev in eng.step() if ev.request_id == rid]
            text = "".join(ev.text for ev in evs)
            ids = [t for ev in evs for t in ev.token_ids]
            lps = [lp.token_id for ev in evs for lp in ev.logprobs or []]
            lpv = [round(lp.logprob, 4) for ev in evs for lp in ev.logprobs or []]
            u = evs[-1].usage
            counts = (u.prompt_tokens, u.completion_tokens, u.cached_tokens)
            events[spec] = (text, ids, lps, lpv, evs[-1].finish_reason, counts)
        assert events[0] == events[4], kw
        if kw.get("logprobs"):
            assert events[4][2] == events[4][1]  # one logprob entry per emitted token
    assert eng.stats.spec_accepted > 0
    assert _blocks_back(eng)


def test_sampled_distribution_is_the_same_on_and_off() -> None:
    """500 samples each way (fixed engine seed): tokens 2-4, which verify steps produce, have
    the same distribution with speculation on and off (chi-square, tail pooled)."""
    eng = _engine(
        conftest.testdata_path("models", "stories260K.gguf"), block_size=8, max_num_seqs=128
    )
    prompt = eng.encode_prompt(REPEAT + "Lily")
    n = 500
    hist = {}
    for spec in (0, 4):
        drafted, accepted = eng.stats.spec_proposed, eng.stats.spec_accepted
        params = [SamplingParams(max_tokens=4, temperature=0.6, spec_tokens=spec)] * n
        outs = eng.generate([prompt] * n, params)
        hist[spec] = [Counter(o[j] for o in outs) for j in (1, 2, 3)]
        drafted, accepted = eng.stats.spec_proposed - drafted, eng.stats.spec_accepted - accepted
        if spec:  # both paths of the rule ran many times
            assert accepted > 50 and drafted - accepted > 50, (drafted, accepted)
    for j, (a, b) in enumerate(zip(hist[0], hist[4])):
        keys = sorted(set(a) | set(b), key=lambda t: -(a[t] + b[t]))
        top, rest = keys[:6], keys[6:]  # pool the tail so expected counts stay large
        table = [[c[t] for t in top] + [sum(c[t] for t in rest)] for c in (a, b)]
        p = chi2_contingency(table).pvalue
        assert p > 1e-3, f"token {j + 2}: chi-square p={p:.2e} {table}"
    assert _blocks_back(eng)


def test_budget_trims_drafts_and_chunked_prefill_runs_beside_verification() -> None:
    path = conftest.testdata_path("models", "stories260K.gguf")
    eng = _engine(path, max_num_batched_tokens=16, block_size=8)
    prompts = _encode(eng, story_prompts(), chat=False)
    _check_on_equals_off(eng, prompts, 24, min_rate=0.1)


def _events(eng: LLMEngine, prompt: list[int], params: SamplingParams) -> tuple[str, list, str]:
    """(text, token ids, finish reason) of one request, from its events as a front end sees them."""
    rid = eng.add_request(prompt, params)
    text, ids, reason = "", [], ""
    while eng.has_work():
        for ev in eng.step():
            assert ev.request_id == rid
            text, ids = text + ev.text, ids + ev.token_ids
            reason = ev.finish_reason or reason
    return text, ids, reason


@pytest.mark.parametrize("max_tokens", [19, 23, 40])
def test_accepted_runs_end_as_token_by_token(stories, max_tokens: int) -> None:
    """A step's run of accepted drafts is detokenized in one go (`_take_run`) unless stop
    strings or a grammar need each token (`_take_each`, forced here by a stop string that never
    matches): the same text, tokens and finish reason, whether max_tokens or a stop id lands
    inside a run."""
    eng = stories
    prompt = eng.encode_prompt(REPEAT + "Lily saw")
    ref = eng.generate([prompt], _greedy(48, 0))[0]
    stop_id = ref[max_tokens // 2 + 5]  # a token the output reaches, inside a run
    for stop_ids in ([], [stop_id]):
        base = dict(stop_token_ids=stop_ids)
        accepted = eng.stats.spec_accepted
        run = _events(eng, prompt, _greedy(max_tokens, 4, **base))
        if not stop_ids:  # runs of accepted drafts were taken
            assert eng.stats.spec_accepted > accepted
        each = _events(eng, prompt, _greedy(max_tokens, 4, stop=["\x00never"], **base))
        assert run == each
        plain = _events(eng, prompt, _greedy(max_tokens, 0, **base))
        assert run == plain
        assert run[2] == ("length" if not stop_ids or stop_id not in ref[:max_tokens] else "stop")
    assert _blocks_back(eng)
