"""A suite of JSON schemas for end-to-end structured-output tests (small, so that even a model
that knows no JSON finishes them in a few dozen tokens: strings and arrays are bounded)."""

from __future__ import annotations

from typing import Any

S = {"type": "string", "maxLength": 8}
INT = {"type": "integer", "minimum": -50, "maximum": 999}
BOOL = {"type": "boolean"}


def obj(props: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
        **extra,
    }


PET = obj({"kind": {"enum": ["cat", "dog", "fish"]}, "name": S})
SCHEMAS: list[dict[str, Any]] = [
    obj({"name": S}),
    obj({"age": INT}),
    obj({"ok": BOOL}),
    obj({"nothing": {"type": "null"}}),
    obj({"color": {"enum": ["red", "green", "blue"]}}),
    obj({"code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"}}),
    obj({"version": {"const": "v1"}, "n": INT}),
    obj({"score": {"type": "number", "minimum": 0, "maximum": 10, "multipleOf": 0.25}}),
    obj({"a": S, "b": INT, "c": BOOL}),
    obj({"a": S, "b": INT}, required=["a"]),  # optional b
    obj({"a": S, "b": S}, required=[]),  # all optional
    obj({"tags": {"type": "array", "items": S, "maxItems": 3}}),
    obj({"nums": {"type": "array", "items": INT, "minItems": 1, "maxItems": 4}}),
    obj({"flags": {"type": "array", "items": BOOL, "maxItems": 2}}),
    obj({"pets": {"type": "array", "items": PET, "maxItems": 2}}),  # array of objects
    obj({"owner": obj({"name": S, "age": INT})}),  # nested object
    obj({"a": obj({"b": obj({"c": INT})})}),  # three levels
    obj({"point": obj({"x": INT, "y": INT}), "label": S}),
    obj({"value": {"anyOf": [INT, S]}}),
    obj({"maybe": {"type": ["integer", "null"], "minimum": 0, "maximum": 9}}),
    obj({"id": {"oneOf": [{"type": "integer", "minimum": 0, "maximum": 99}, {"type": "null"}]}}),
    {
        "$defs": {"pet": PET},
        **obj(
            {
                "best": {"$ref": "#/$defs/pet"},
                "others": {"type": "array", "items": {"$ref": "#/$defs/pet"}, "maxItems": 2},
            }
        ),
    },
    {
        "$defs": {"pos": obj({"x": INT, "y": INT})},
        **obj({"start": {"$ref": "#/$defs/pos"}, "end": {"$ref": "#/$defs/pos"}}),
    },
    {"type": "array", "items": INT, "minItems": 1, "maxItems": 3},  # top-level array
    {"type": "array", "items": obj({"k": S, "v": INT}), "maxItems": 2},
    {"enum": ["yes", "no", "maybe"]},  # top-level enum
    {"type": "integer", "minimum": 1, "maximum": 5},
    {"type": "boolean"},
    obj({"when": {"type": "string", "format": "date"}}),
    obj(
        {
            "status": {"enum": ["open", "closed"]},
            "count": INT,
            "items": {
                "type": "array",
                "items": obj(
                    {
                        "sku": {"type": "string", "pattern": "^[a-z]{3}$"},
                        "qty": {"type": "integer", "minimum": 1, "maximum": 9},
                    }
                ),
                "maxItems": 2,
            },
        }
    ),
    obj(
        {
            "matrix": {
                "type": "array",
                "maxItems": 2,
                "items": {"type": "array", "items": INT, "maxItems": 2},
            }
        }
    ),
    obj(
        {
            "meta": {
                "type": "object",
                "patternProperties": {"^[a-z]{1,4}$": INT},
                "additionalProperties": False,
                "maxProperties": 2,
            }
        }
    ),
]
