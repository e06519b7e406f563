"""OpenAI's strict structured-output rules: `response_format.json_schema.strict: true`.

In strict mode OpenAI accepts only schemas where every object lists all its properties in
`required` and sets `additionalProperties: false`; we refuse the same schemas with the same
reason, so a request that works here works there too. (Output follows the schema in both
modes: every constrained request is enforced by the grammar.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# keywords whose value is a schema, a list of schemas, or a name -> schema map
_ONE = ("items", "additionalItems", "not", "if", "then", "else", "contains")
_LIST = ("anyOf", "allOf", "oneOf", "prefixItems")
_MAP = ("properties", "$defs", "definitions", "patternProperties")


def _children(schema: dict[str, Any], path: str) -> Iterator[tuple[Any, str]]:
    for key in _ONE:
        if isinstance(schema.get(key), dict):
            yield schema[key], f"{path}/{key}"
    for key in _LIST:
        for i, sub in enumerate(schema.get(key) or []):
            yield sub, f"{path}/{key}/{i}"
    for key in _MAP:
        for name, sub in (schema.get(key) or {}).items():
            yield sub, f"{path}/{key}/{name}"


def strict_problem(schema: Any, path: str = "#") -> str | None:
    """The first violation of the strict rules as 'PATH: reason', or None."""
    if not isinstance(schema, dict):
        return None
    is_object = schema.get("type") == "object" or "properties" in schema
    if is_object:
        if schema.get("additionalProperties") is not False:
            return f'{path}: objects need "additionalProperties": false'
        missing = sorted(set(schema.get("properties") or {}) - set(schema.get("required") or []))
        if missing:
            return f"{path}: every property must be required (missing: {', '.join(missing)})"
    for sub, sub_path in _children(schema, path):
        problem = strict_problem(sub, sub_path)
        if problem:
            return problem
    return None
