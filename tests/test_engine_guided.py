"""Guided decoding in the engine (CPU, stories260K, which knows no JSON): constrained and free
sequences in one batch, every constrained answer parses and validates, free ones unchanged."""

from __future__ import annotations

import json

import jsonschema
import pytest
from structured_schemas import SCHEMAS

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.structured.spec import ConstraintError, ConstraintSpec


@pytest.fixture(scope="module")
def engine(testdata) -> LLMEngine:
    path = testdata / "models" / "stories260K.gguf"
    return LLMEngine(EngineConfig(model=str(path), device="cpu", max_num_seqs=64))


@pytest.fixture(scope="module")
def testdata():
    from conftest import TESTDATA

    if not TESTDATA.exists():
        pytest.skip(f"test data folder not found: {TESTDATA}")
    return TESTDATA


def run(eng: LLMEngine, prompts: list[list[int]], params: list[SamplingParams]):
    ids = [eng.add_request(p, sp) for p, sp in zip(prompts, params)]
    out: dict[str, list[int]] = {i: [] for i in ids}
    reasons: dict[str, str] = {}
    while eng.has_work():
        for ev in eng.step():
            out[ev.request_id] += ev.token_ids
            if ev.finish_reason:
                reasons[ev.request_id] = ev.finish_reason
    return [(out[i], reasons[i]) for i in ids]


def test_schema_suite_in_one_batch_with_free_sequences(engine: LLMEngine) -> None:
    prompt = engine.encode_prompt("Once upon a time")
    free = SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)
    alone = run(engine, [prompt], [free])[0]
    params = [
        SamplingParams(
            max_tokens=200,
            temperature=0.0 if k % 2 else 0.8,
            seed=k,
            constraint=ConstraintSpec.json_schema(schema),
        )
        for k, schema in enumerate(SCHEMAS)
    ]
    results = run(engine, [prompt] * (len(SCHEMAS) + 2), [free, *params, free])
    assert results[0] == alone and results[-1] == alone  # free rows are not touched
    for schema, (ids, reason) in zip(SCHEMAS, results[1:-1]):
        text = engine.tokenizer.decode(ids, continuation=True)
        assert reason == "stop", text
        jsonschema.validate(json.loads(text), schema)
    assert engine.guided.masked_rows > 0 and engine.guided.cpu_us_per_token > 0
    bm = engine.block_manager
    assert bm.num_used_blocks == 0


def test_choices_advance_independently(engine: LLMEngine) -> None:
    schema = SCHEMAS[17]  # a nested object and a string
    prompt = engine.encode_prompt("Tom had a cat.")
    spec = ConstraintSpec.json_schema(schema)
    params = [
        SamplingParams(max_tokens=200, temperature=1.0, seed=s, constraint=spec) for s in range(4)
    ]
    texts = [
        engine.tokenizer.decode(ids, continuation=True)
        for ids, _ in run(engine, [prompt] * 4, params)
    ]
    for text in texts:
        jsonschema.validate(json.loads(text), schema)
    assert len(set(texts)) > 1


def test_finished_grammar_ends_even_when_eos_is_ignored(engine: LLMEngine) -> None:
    spec = ConstraintSpec.grammar('root ::= "The " ("cat" | "dog") " sat."')
    p = SamplingParams(max_tokens=50, temperature=0.0, ignore_eos=True, constraint=spec)
    ids, reason = run(engine, [engine.encode_prompt("Once")], [p])[0]
    assert reason == "stop"
    assert engine.tokenizer.decode(ids, continuation=True) in ("The cat sat.", "The dog sat.")


def test_bad_constraint_is_refused_before_anything_is_queued(engine: LLMEngine) -> None:
    bad = ConstraintSpec.json_schema({"type": "array", "uniqueItems": True})
    with pytest.raises(ConstraintError, match="uniqueItems"):
        engine.add_request(engine.encode_prompt("x"), SamplingParams(constraint=bad))
    assert not engine.has_work() and not engine.requests


def test_drafts_are_cut_by_the_grammar(engine: LLMEngine) -> None:
    spec = ConstraintSpec.json_schema({"enum": ["yes", "no"]})
    rid = engine.add_request(engine.encode_prompt("x"), SamplingParams(constraint=spec))
    seq = engine.requests[rid].seq
    tok = engine.tokenizer
    good = tok.encode('"yes"', add_special=False, continuation=True)
    bad = tok.encode('"yak"', add_special=False, continuation=True)
    assert engine.guided.cut_draft(seq.seq_id, good) == good
    cut = engine.guided.cut_draft(seq.seq_id, bad)
    assert len(cut) < len(bad) and bad[: len(cut)] == cut
    engine.abort(rid)
    assert seq.seq_id not in engine.guided


def test_masks_for_verify_rows_follow_the_row_layout(engine: LLMEngine) -> None:
    """An item with drafts owns 1 + len(drafts) rows; free items' rows stay untouched."""
    import torch

    from localllm.engine.guided import GuidedDecoding

    tok = engine.tokenizer
    guided = GuidedDecoding(tok, engine.model_cfg.vocab_size, engine.runner.model.ops)
    spec = ConstraintSpec.json_schema({"enum": ["yes", "no"]})
    guided.add(1, spec)
    guided.add(3, spec)
    draft = guided.cut_draft(1, tok.encode('"yes"', add_special=False, continuation=True))[:2]
    assert len(draft) == 2
    items = [(1, draft), (2, [5, 6]), (3, [])]  # seq 2 is free
    layout = [(0, 1 + len(draft)), (1 + len(draft), 3), (4 + len(draft), 1)]
    logits = torch.zeros(5 + len(draft), engine.model_cfg.vocab_size)
    greedy = guided.apply(guided.start_masks(items), logits, layout, None)
    allowed = [set(torch.nonzero(row == 0).flatten().tolist()) for row in logits]
    assert greedy is not None and greedy.tolist() == [min(a) for a in allowed]  # first allowed
    full = set(range(engine.model_cfg.vocab_size))
    assert allowed[len(draft) + 1 : len(draft) + 4] == [full] * 3  # the free item
    for j in range(len(draft)):
        assert draft[j] in allowed[j] and len(allowed[j]) < len(full)
    assert allowed[-1] == allowed[0]  # seq 3 is where seq 1 started
    assert guided.masked_rows == len(draft) + 2
    guided.close()


def test_speculative_drafts_under_a_grammar(testdata) -> None:
    """n-gram drafts of a constrained sequence are cut by its grammar and verified under its
    masks: greedy output is the same with speculation on and off, and it validates."""
    eng = LLMEngine(
        EngineConfig(
            model=str(testdata / "models" / "stories260K.gguf"),
            device="cpu",
            spec_tokens=4,
            spec_max_batch=128,
        )
    )
    schema = {
        "type": "object",
        "properties": {"pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 9}},
        "required": ["pets"],
        "additionalProperties": False,
    }
    spec = ConstraintSpec.json_schema(schema)
    prompt = eng.encode_prompt('{"pets": ["cat", "dog", "cat", "cat", "dog", "cat"]} ' * 3)
    outs = {}
    for k in (0, 4):
        p = SamplingParams(max_tokens=80, temperature=0.0, constraint=spec, spec_tokens=k)
        outs[k] = run(eng, [prompt, prompt], [p, p])
    assert outs[0] == outs[4]
    assert eng.stats.spec_accepted > 0  # drafts were verified under the grammar and kept
    for ids, reason in outs[4]:
        assert reason == "stop"
        jsonschema.validate(json.loads(eng.tokenizer.decode(ids, continuation=True)), schema)
