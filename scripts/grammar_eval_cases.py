"""Cases of scripts/eval_grammar_engines.py: a realistic schema with a valid instance, one
(schema, valid, invalid) triple per JSON-schema feature, and a GBNF grammar."""

from __future__ import annotations

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string", "pattern": "^[a-z]+@[a-z]+\\.com$"},
        "role": {"enum": ["admin", "user", "guest"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"$ref": "#/$defs/address"},
        "orders": {"type": "array", "items": {"$ref": "#/$defs/order"}},
    },
    "required": ["name", "age", "role", "address", "orders"],
    "additionalProperties": False,
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["street", "zip"],
            "additionalProperties": False,
        },
        "order": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "total": {"type": "number"},
                "paid": {"type": "boolean"},
                "note": {"type": ["string", "null"]},
            },
            "required": ["id", "total", "paid", "note"],
            "additionalProperties": False,
        },
    },
}
INSTANCE = {
    "name": "Ada Lovelace, née Byron 🦙",
    "age": 36,
    "email": "ada@analytical.com",
    "role": "admin",
    "tags": ["math", "engines", "poetry"],
    "address": {"street": "12 St James's Square", "zip": "SW1Y 4JH"},
    "orders": [
        {"id": 1, "total": 12.5, "paid": True, "note": None},
        {"id": 2, "total": 3e2, "paid": False, "note": "gift wrap, please"},
    ],
}
# feature -> (schema, valid instance, invalid instance)
OBJ = {"type": "object", "additionalProperties": False}
FEATURES: dict[str, tuple[dict, object, object]] = {
    "object+required": (
        {**OBJ, "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"a": 1},
        {},
    ),
    "optional property": (
        {**OBJ, "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
        {"b": "x"},
        {"c": 1},
    ),
    "array minItems/maxItems": (
        {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3},
        [1, 2],
        [1],
    ),
    "enum": ({"enum": ["red", "green", 3]}, "green", "blue"),
    "const": ({"const": "x"}, "x", "y"),
    "string pattern": ({"type": "string", "pattern": "^[0-9]{3}-[a-z]+$"}, "123-ab", "12-ab"),
    "string minLength/maxLength": ({"type": "string", "minLength": 2, "maxLength": 3}, "ab", "a"),
    "string format date": ({"type": "string", "format": "date"}, "2024-02-29", "yesterday"),
    "integer min/max": ({"type": "integer", "minimum": 1, "maximum": 5}, 5, 6),
    "number exclusiveMinimum": ({"type": "number", "exclusiveMinimum": 0}, 0.5, -1),
    "boolean": ({"type": "boolean"}, True, "true"),
    "null": ({"type": "null"}, None, 0),
    "type list": ({"type": ["integer", "null"]}, None, "x"),
    "anyOf": ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "s", [1]),
    "oneOf": ({"oneOf": [{"type": "integer"}, {"type": "boolean"}]}, False, "s"),
    "$defs $ref": (
        {"$defs": {"p": {"type": "integer"}}, **OBJ, "properties": {"x": {"$ref": "#/$defs/p"}}},
        {"x": 2},
        {"x": "2"},
    ),
    "recursive $ref": (
        {
            "$defs": {
                "node": {
                    **OBJ,
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                    "required": ["kids"],
                }
            },
            "$ref": "#/$defs/node",
        },
        {"kids": [{"kids": []}]},
        {"kids": [{}]},
    ),
    "additionalProperties schema": (
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"k": 1},
        {"k": "v"},
    ),
    "prefixItems": (
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        [1, "a"],
        ["a", 1],
    ),
    "allOf": (
        {"allOf": [{"type": "integer"}, {"minimum": 3}]},
        4,
        2,
    ),
}
GBNF = r"""
root   ::= "answer: " ("yes" | "no") (" because " word (" " word)*)? "."
word   ::= [a-z]+
"""
