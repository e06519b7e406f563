"""Grammar constraints: compile (cached), masks, accept, drafts, rollback, errors."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch
from structured_models import compiler, tokenizer

from localllm.kernels.registry import Ops
from localllm.structured.bitmask import BatchMasker, allocate_bitmask
from localllm.structured.constraint import Constraint, ConstraintBroken
from localllm.structured.spec import ConstraintError, ConstraintSpec

MASKED_ARGMAX = Ops("reference").masked_argmax

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "role": {"enum": ["admin", "user"]},
        "pets": {"type": "array", "items": {"$ref": "#/$defs/pet"}, "maxItems": 2},
    },
    "required": ["name", "age", "role", "pets"],
    "additionalProperties": False,
    "$defs": {
        "pet": {
            "type": "object",
            "properties": {"kind": {"enum": ["cat", "dog"]}, "good": {"type": "boolean"}},
            "required": ["kind", "good"],
            "additionalProperties": False,
        }
    },
}
GOOD = {"name": "Ada", "age": 36, "role": "admin", "pets": [{"kind": "cat", "good": True}]}


def ids_of(name: str, text: str) -> list[int]:
    return tokenizer(name).encode(text, add_special=False, parse_special=False, continuation=True)


def constraint(name: str, spec: ConstraintSpec) -> Constraint:
    comp = compiler(name)
    return Constraint(comp, comp.compile(spec))


@pytest.mark.parametrize("name", ["stories", "llama2", "gpt2"])
def test_valid_answer_is_accepted_to_the_end(name: str) -> None:
    c = constraint(name, ConstraintSpec.json_schema(PERSON))
    ids = ids_of(name, json.dumps(GOOD))
    assert c.valid_prefix(ids) == len(ids)  # validate_tokens does not advance
    for t in ids:
        assert t in c.allowed_ids()
        c.accept(t)
    assert c.accepting and c.finished  # an object admits nothing after its last brace
    assert c.allowed_ids() == list(compiler(name).table.stop_ids)
    c.accept(compiler(name).table.stop_ids[0])


def test_invalid_answers_are_cut_where_they_leave_the_schema() -> None:
    c = constraint("llama2", ConstraintSpec.json_schema(PERSON))
    good = json.dumps(GOOD)
    for bad in (good.replace("admin", "root"), good.replace("36", '"36"'), "[" + good):
        ids = ids_of("llama2", bad)
        cut = c.valid_prefix(ids)
        assert cut < len(ids)
        prefix = compiler("llama2").table.text_bytes(ids[:cut]).decode()
        assert good.startswith(prefix)  # everything kept is still on a valid path
    with pytest.raises(ConstraintBroken):
        c.accept(ids_of("llama2", "x")[0])


def test_rollback_restores_the_state() -> None:
    c = constraint("stories", ConstraintSpec.json_schema(PERSON))
    ids = ids_of("stories", json.dumps(GOOD))
    for t in ids[:10]:
        c.accept(t)
    before = c.allowed_ids()
    for t in ids[10:15]:
        c.accept(t)
    c.rollback(5)
    assert c.allowed_ids() == before and c.num_accepted == 10


def test_compile_is_cached_per_spec() -> None:
    comp = compiler("stories")
    a = comp.compile(ConstraintSpec.json_schema(PERSON))
    b = comp.compile(ConstraintSpec.json_schema(json.loads(json.dumps(PERSON))))
    assert a is b


def test_json_object_and_gbnf_and_regex() -> None:
    obj = constraint("gpt2", ConstraintSpec.json_object())
    assert obj.valid_prefix(ids_of("gpt2", '{"a": [1, {"b": null}]}')) == len(
        ids_of("gpt2", '{"a": [1, {"b": null}]}')
    )
    assert obj.valid_prefix(ids_of("gpt2", "[1]")) == 0
    gbnf = 'root ::= "answer: " ("yes" | "no") "."'
    g = constraint("gpt2", ConstraintSpec.grammar(gbnf))
    assert g.valid_prefix(ids_of("gpt2", "answer: no.")) == len(ids_of("gpt2", "answer: no."))
    assert g.valid_prefix(ids_of("gpt2", "answer: maybe.")) < len(ids_of("gpt2", "answer: maybe."))
    r = constraint("gpt2", ConstraintSpec.grammar("[0-9]{3}-[a-z]+", kind="regex"))
    assert r.valid_prefix(ids_of("gpt2", "123-abc")) == len(ids_of("gpt2", "123-abc"))
    assert r.valid_prefix(ids_of("gpt2", "12a")) < 3


@pytest.mark.parametrize(
    "spec, words",
    [
        (lambda: ConstraintSpec.json_schema({"type": "strng"}), ["invalid schema", "strng"]),
        (
            lambda: ConstraintSpec.json_schema({"type": "array", "uniqueItems": True}),
            ["uniqueItems"],
        ),
        (lambda: ConstraintSpec.json_schema({"not": {"type": "string"}}), ["not"]),
        (lambda: ConstraintSpec.json_schema({"$ref": "#/$defs/missing"}), ["missing"]),
        (
            lambda: ConstraintSpec.json_schema({"type": "string", "pattern": "(["}),
            ["invalid schema", "unclosed"],
        ),
        (lambda: ConstraintSpec.json_schema({"format": "weird", "type": "string"}), ["weird"]),
        (lambda: ConstraintSpec.grammar('root ::= "a" undefined'), ["grammar", "undefined"]),
        (lambda: ConstraintSpec.grammar("   "), ["empty"]),
        (lambda: ConstraintSpec.grammar("a(", kind="regex"), ["unclosed"]),
        (lambda: ConstraintSpec.json_schema([1]), ["must be an object"]),
        (
            lambda: ConstraintSpec.json_schema(
                {"type": "object", "properties": {"a": {"type": "string"}}}, strict=True
            ),
            ["strict", "additionalProperties"],
        ),
        (
            lambda: ConstraintSpec.json_schema(
                {
                    "type": "object",
                    "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                    "required": ["a"],
                    "additionalProperties": False,
                },
                strict=True,
            ),
            ["strict", "missing: b"],
        ),
    ],
)
def test_bad_specs_name_the_problem(spec, words: list[str]) -> None:
    with pytest.raises(ConstraintError) as e:
        compiler("stories").compile(spec())
    message = str(e.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_strict_schema_from_pydantic_is_accepted() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    compiler("stories").compile(ConstraintSpec.json_schema(schema, strict=True))


def test_random_logits_under_a_mask_always_give_valid_json() -> None:
    """The greedy loop with the masks applied by `masked_argmax`: whatever the logits, the
    output validates."""
    name = "llama2"
    comp = compiler(name)
    gen = torch.Generator().manual_seed(0)
    masker = BatchMasker(comp.table.vocab_size)
    for trial in range(3):
        cons = [constraint(name, ConstraintSpec.json_schema(PERSON)) for _ in range(2)]
        outs: list[list[int]] = [[], []]
        bitmask = allocate_bitmask(2, comp.table.vocab_size)
        for _ in range(200):
            live = [k for k, c in enumerate(cons) if not c.finished]
            if not live:
                break
            masker.fill([cons[k] for k in live], bitmask)
            logits = torch.randn(3, comp.table.vocab_size + 7, generator=gen)  # + a free row
            rows = torch.tensor(live)
            free = logits[2].clone()
            greedy = torch.full((3,), -1, dtype=torch.int64)
            MASKED_ARGMAX(logits, bitmask[: len(live)], rows, greedy)
            assert torch.equal(logits[2], free) and greedy[2] == -1
            assert torch.isinf(logits[rows][:, comp.table.vocab_size :]).all()
            for k in live:
                tok = int(greedy[k])
                assert tok == int(logits[k].argmax())
                cons[k].accept(tok)
                outs[k].append(tok)
        for k in range(2):
            assert cons[k].finished, trial
            doc = json.loads(comp.table.text_bytes(outs[k]))
            jsonschema.validate(doc, PERSON)


def test_batch_fill_with_drafts_gives_the_mask_after_each_draft_token() -> None:
    name = "gpt2"
    comp = compiler(name)
    ids = ids_of(name, json.dumps(GOOD))
    c = constraint(name, ConstraintSpec.json_schema(PERSON))
    draft = ids[:3] + ids_of(name, "zz")[:1]  # the 4th token leaves the grammar
    bitmask = allocate_bitmask(len(draft) + 1, comp.table.vocab_size)
    BatchMasker(comp.table.vocab_size).fill([c], bitmask, drafts=[draft])
    allowed = apply_ids(bitmask, comp.table.vocab_size)
    ref = constraint(name, ConstraintSpec.json_schema(PERSON))
    for k in range(3):
        assert allowed[k] == set(ref.allowed_ids())
        ref.accept(draft[k])
    assert allowed[3] == set(ref.allowed_ids()) and draft[3] not in allowed[3]
    assert allowed[4] == set()
    assert c.num_accepted == 0 and c.valid_prefix(draft) == 3  # state unchanged


def apply_ids(bitmask: torch.Tensor, vocab: int) -> list[set[int]]:
    logits = torch.zeros(bitmask.shape[0], vocab)
    rows = torch.arange(bitmask.shape[0])
    MASKED_ARGMAX(logits, bitmask, rows, torch.empty_like(rows))
    return [set(torch.nonzero(row == 0).flatten().tolist()) for row in logits]
