"""Specs -> llguidance grammars for one tokenizer, validated and cached.

JSON output has one layout: `json.dumps`'s separators (", " and ": ") and no other
whitespace. Free whitespace would let a small model that "knows no JSON" write newlines
forever; a schema may still ask for another layout with llguidance's `x-guidance` options.
Errors (bad schema, a keyword the engine does not implement, a GBNF rule that is not
defined ...) become a `ConstraintError` naming the request field and the problem.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import llguidance as llg

from localllm.structured.spec import ConstraintError, ConstraintSpec
from localllm.structured.tokenizer_llg import llg_tokenizer
from localllm.structured.vocab import TokenTable
from localllm.tokenizer import Tokenizer

JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
CACHE_SIZE = 256  # compiled grammars kept per model
ANY_OBJECT = '{"type": "object"}'


@dataclass(frozen=True)
class CompiledGrammar:
    spec: ConstraintSpec
    grammar: str  # llguidance's grammar definition (JSON text)


def _to_llg(spec: ConstraintSpec) -> str:
    """The llguidance grammar for a spec; ValueError for text that cannot be converted."""
    if spec.kind == "json_schema":
        return llg.LLMatcher.grammar_from_json_schema(spec.source, defaults=JSON_LAYOUT)  # type: ignore[arg-type]
    if spec.kind == "json_object":
        return llg.LLMatcher.grammar_from_json_schema(ANY_OBJECT, defaults=JSON_LAYOUT)  # type: ignore[arg-type]
    if spec.kind == "gbnf":
        return llg.grammar_from("gbnf", spec.source)
    if spec.kind == "lark":
        return llg.LLMatcher.grammar_from_lark(spec.source)
    return llg.LLMatcher.grammar_from_regex(spec.source)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class GrammarCompiler:
    """Compiles constraint specs for one model's tokenizer (thread-safe, LRU-cached)."""

    def __init__(self, tokenizer: Tokenizer, model_vocab_size: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.table = TokenTable.from_tokenizer(tokenizer)
        self.llg_tokenizer = llg_tokenizer(tokenizer, self.table)
        # the model's logits may be wider than the vocabulary (padded embeddings)
        self.model_vocab_size = max(model_vocab_size or 0, self.table.vocab_size)
        self._cache: OrderedDict[ConstraintSpec, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()

    def special_id(self, text: str) -> int | None:
        """The id of the special (non-text) token spelled `text`, if the vocabulary has one."""
        tid = self.tokenizer.token_id(text)
        return tid if tid is not None and self.table.is_special(tid) else None

    def compile(self, spec: ConstraintSpec) -> CompiledGrammar:
        with self._lock:
            hit = self._cache.get(spec)
            if hit is not None:
                self._cache.move_to_end(spec)
                return hit
        compiled = CompiledGrammar(spec, self._build(spec))
        with self._lock:
            self._cache[spec] = compiled
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return compiled

    def _build(self, spec: ConstraintSpec) -> str:
        what = "schema" if spec.is_json else "grammar"
        try:
            grammar = _to_llg(spec)
        except ValueError as e:
            raise ConstraintError(
                f"{spec.param}: invalid {what}: {_one_line(str(e))}", spec.param
            ) from None
        is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(
            grammar, self.llg_tokenizer
        )
        if is_error:
            raise ConstraintError(
                f"{spec.param}: invalid {what}: {_one_line(messages[0])}", spec.param
            )
        if messages:  # llguidance warns where it would not enforce part of the request
            raise ConstraintError(
                f"{spec.param}: unsupported in {what}: {_one_line('; '.join(messages))}",
                spec.param,
            )
        return grammar
