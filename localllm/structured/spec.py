"""What a request asks the output to follow: a JSON schema, any JSON object, or a grammar.

A `ConstraintSpec` is plain data (no engine, no torch): the server builds it from the request
fields, `SamplingParams` carries it, and the compiler turns it into a grammar for the
engine's tokenizer. Equal specs compile once (the spec is the cache key).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from localllm.errors import RequestError
from localllm.structured.strict import strict_problem

# kind -> what the source text is
KINDS = {
    "json_schema": "a JSON schema (JSON text)",
    "json_object": "any JSON object",
    "gbnf": "a llama.cpp GBNF grammar",
    "lark": "a Lark grammar (llguidance dialect)",
    "regex": "a regular expression the whole output matches",
}


class ConstraintError(RequestError):
    """A schema or grammar that cannot be used; the message names the problem (HTTP 400)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message, code="invalid_grammar", param=param)


@dataclass(frozen=True)
class ConstraintSpec:
    kind: str  # a key of KINDS
    source: str  # the schema as JSON text, or the grammar / regex text
    param: str = "response_format"  # the request field errors name

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown constraint kind {self.kind!r}")

    @classmethod
    def json_schema(
        cls, schema: Any, *, strict: bool = False, param: str = "response_format"
    ) -> ConstraintSpec:
        """From a decoded JSON schema; strict=True also applies OpenAI's strict-mode rules."""
        if schema is True:
            schema = {}
        if schema is False:
            raise ConstraintError(f"{param}: the schema `false` admits no value", param)
        if not isinstance(schema, dict):
            raise ConstraintError(
                f"{param}: a JSON schema must be an object, not {type(schema).__name__}", param
            )
        if strict:
            problem = strict_problem(schema)
            if problem:
                raise ConstraintError(f"{param}: strict schema: {problem}", param)
        # key order is kept: properties are generated in the order the schema lists them
        return cls("json_schema", json.dumps(schema), param)

    @classmethod
    def json_object(cls, param: str = "response_format") -> ConstraintSpec:
        return cls("json_object", "", param)

    @classmethod
    def grammar(cls, text: str, kind: str = "gbnf", param: str = "grammar") -> ConstraintSpec:
        if not text.strip():
            raise ConstraintError(f"{param}: the grammar is empty", param)
        return cls(kind, text, param)

    @property
    def is_json(self) -> bool:
        return self.kind in ("json_schema", "json_object")
