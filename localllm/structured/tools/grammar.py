"""The grammar that forces a tool call: `tool_choice` "required" or a named function.

The answer must be one call (or several, with `parallel_tool_calls`) in the model's own
format, each `{"name": <one of the tools>, "<arguments key>": <that tool's parameters
schema>}`. Markers that are one control token in the vocabulary (Mistral's `[TOOL_CALLS]`)
are matched as that token, since a model emits them as one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from localllm.structured.compiler import JSON_LAYOUT
from localllm.structured.spec import ConstraintError, ConstraintSpec
from localllm.structured.tools.formats import ToolFormat

EMPTY_PARAMS = {"type": "object", "properties": {}, "additionalProperties": False}


def call_schema(fmt: ToolFormat, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON schema of one call object to any of `tools` (OpenAI tool dicts)."""
    options = []
    for tool in tools:
        fn = tool["function"]
        options.append(
            {
                "type": "object",
                "properties": {
                    "name": {"const": fn["name"]},
                    fmt.args_key: fn.get("parameters") or EMPTY_PARAMS,
                },
                "required": ["name", fmt.args_key],
                "additionalProperties": False,
            }
        )
    schema: dict[str, Any] = options[0] if len(options) == 1 else {"anyOf": options}
    return {**schema, "x-guidance": JSON_LAYOUT}


def _literal(text: str, fmt: ToolFormat, special_id: Callable[[str], int | None]) -> str:
    """A Lark expression for `text`; a marker that is a control token becomes `<[id]>`."""
    if not text:
        return ""
    for marker in fmt.markers:
        tid = special_id(marker)
        if tid is not None and marker in text:
            before, _, after = text.partition(marker)
            parts = [
                _literal(before, fmt, special_id),
                f"<[{tid}]>",
                _literal(after, fmt, special_id),
            ]
            return " ".join(p for p in parts if p)
    return json.dumps(text)


def _answer_rule(answer: ConstraintSpec) -> str:
    """The Lark rule for a JSON answer given instead of calls (`tool_choice` auto)."""
    if answer.kind == "json_object":
        schema: Any = {"type": "object"}
    elif answer.kind == "json_schema":
        schema = json.loads(answer.source)
    else:
        raise ConstraintError(
            f"{answer.param}: a {answer.kind} grammar cannot be combined with tools", answer.param
        )
    return f"answer: %json {json.dumps({'x-guidance': JSON_LAYOUT, **schema})}\n"


def tool_call_spec(
    fmt: ToolFormat,
    tools: list[dict[str, Any]],
    name: str | None,
    parallel: bool,
    special_id: Callable[[str], int | None],
    answer: ConstraintSpec | None = None,
) -> ConstraintSpec:
    """The constraint for tool calls; `name` forces that function, None any of them.
    `answer`: a JSON format the model may answer in instead of calling (tool_choice auto
    with response_format); without it the answer must be calls."""
    if name is not None:
        tools = [t for t in tools if t["function"]["name"] == name]
        if not tools:
            raise ConstraintError(
                f"tool_choice names {name!r}, which is not in tools", "tool_choice"
            )
    if not tools:
        raise ConstraintError("tool_choice 'required' needs at least one tool", "tool_choice")
    lit = lambda text: _literal(text, fmt, special_id)
    call = " ".join(p for p in (lit(fmt.open), "call_json", lit(fmt.close)) if p)
    more = f"({lit(fmt.separator)} call)*" if parallel and fmt.parallel else ""
    start = " ".join(p for p in (lit(fmt.list_open), "call", more, lit(fmt.list_close)) if p)
    lark = f"call: {call}\ncall_json: %json {json.dumps(call_schema(fmt, tools))}\n"
    if answer is None:
        lark = f"start: {start}\n" + lark
    else:
        lark = f"start: calls | answer\ncalls: {start}\n{_answer_rule(answer)}" + lark
    return ConstraintSpec("lark", lark, "tools")
