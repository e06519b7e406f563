"""Structured output and tool calls for the routes: request fields -> the constraint and the
tool plan of a request; the model's answer -> OpenAI messages and stream deltas.

`response_format` (json_object / json_schema), llama.cpp's `grammar` and `json_schema` are
alternatives: at most one per request. With `tools`, `tool_choice` picks the mode: "auto"
(the default) renders the tools and parses calls out of the answer, "none" leaves them out,
"required" or a named function constrains the answer to calls. A JSON response_format
beside tools (auto) constrains the answer to either calls or that JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio

from localllm.chat_template import ChatTemplate
from localllm.engine.async_engine import AsyncEngine
from localllm.errors import RequestError
from localllm.server.schemas_structured import (
    NamedToolChoice,
    OutputFormatFields,
    ResponseFormat,
    ToolFields,
)
from localllm.structured.compiler import GrammarCompiler
from localllm.structured.spec import ConstraintSpec
from localllm.structured.tools.formats import ToolFormat, detect_format
from localllm.structured.tools.grammar import tool_call_spec
from localllm.structured.tools.prompt import render_with_tools
from localllm.structured.tools.stream import ToolStreamParser


def output_constraint(req: OutputFormatFields) -> ConstraintSpec | None:
    """The constraint asked for by response_format / grammar / json_schema, if any."""
    return format_constraint(req.response_format, req.grammar, req.json_schema)


def format_constraint(
    rf: ResponseFormat | None, grammar: str | None, json_schema: dict[str, Any] | None
) -> ConstraintSpec | None:
    """The constraint of OpenAI's response_format and llama.cpp's grammar / json_schema
    (at most one of them); None for none, or response_format text."""
    given = [
        name
        for name, on in (
            ("response_format", rf is not None and rf.type != "text"),
            ("grammar", grammar is not None),
            ("json_schema", json_schema is not None),
        )
        if on
    ]
    if len(given) > 1:
        raise RequestError(f"{given[0]} and {given[1]} cannot be combined", param=given[1])
    if grammar is not None:
        return ConstraintSpec.grammar(grammar, "gbnf", param="grammar")
    if json_schema is not None:
        return ConstraintSpec.json_schema(json_schema, param="json_schema")
    if rf is None or rf.type == "text":
        return None
    if rf.type == "json_object":
        return ConstraintSpec.json_object()
    if rf.json_schema is None or rf.json_schema.schema_ is None:
        raise RequestError(
            "response_format of type json_schema needs json_schema.schema",
            param="response_format",
        )
    strict = bool(rf.json_schema.strict)
    return ConstraintSpec.json_schema(rf.json_schema.schema_, strict=strict)


@dataclass
class ToolPlan:
    fmt: ToolFormat
    tools: list[dict[str, Any]]  # OpenAI tool dicts, as the template receives them
    forced: str | None  # None: auto; "" any tool (required); else that function's name
    parallel: bool

    def constraint(
        self, compiler: GrammarCompiler, output: ConstraintSpec | None
    ) -> ConstraintSpec | None:
        """The request's constraint once tools are in play."""
        if self.forced is None:
            if output is None:
                return None
            return tool_call_spec(
                self.fmt, self.tools, None, self.parallel, compiler.special_id, answer=output
            )
        if output is not None:
            raise RequestError(
                f"tool_choice forces a tool call; it cannot be combined with {output.param}",
                param="tool_choice",
            )
        name = self.forced or None
        return tool_call_spec(self.fmt, self.tools, name, self.parallel, compiler.special_id)


def tool_plan(req: ToolFields, template_source: str) -> ToolPlan | None:
    """How a chat request uses tools; None when it offers none (or says tool_choice none)."""
    choice = req.tool_choice
    if not req.tools:
        if choice not in (None, "none", "auto"):
            raise RequestError("tool_choice needs tools", param="tool_choice")
        return None
    if choice == "none":
        return None
    tools = [t.model_dump(exclude_none=True) for t in req.tools]
    names = [t["function"]["name"] for t in tools]
    if len(set(names)) != len(names):
        raise RequestError("tools have duplicate function names", param="tools")
    forced: str | None = None
    if choice == "required":
        forced = ""
    elif isinstance(choice, NamedToolChoice):
        if choice.function.name not in names:
            raise RequestError(
                f"tool_choice names {choice.function.name!r}, which is not in tools",
                param="tool_choice",
            )
        forced = choice.function.name
    # a named function is one call (as OpenAI answers it); "required" may make several
    parallel = req.parallel_tool_calls is not False and not forced
    return ToolPlan(detect_format(template_source), tools, forced, parallel)


class ChoiceTools:
    """One choice's answer read for tool calls, whole or streamed."""

    def __init__(self, plan: ToolPlan) -> None:
        self._parser = ToolStreamParser(plan.fmt, plan.parallel)

    def delta(self, text: str) -> list[dict[str, Any]]:
        """Chat deltas for newly generated text (content and/or tool-call pieces)."""
        return self._deltas(self._parser.feed(text))

    def finish(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The last deltas, and the whole answer as an OpenAI message."""
        last, parsed = self._parser.finish()
        calls = [
            {"id": i, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for i, c in zip(self._parser.call_ids, parsed.calls)
        ]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": (parsed.content or None) if calls else parsed.content,
            "refusal": None,
        }
        if calls:
            message["tool_calls"] = calls
        return self._deltas(last), message

    @property
    def called(self) -> bool:
        return bool(self._parser.call_ids)

    @staticmethod
    def _deltas(d: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if d.content:
            out.append({"content": d.content})
        if d.tool_calls:
            out.append({"tool_calls": d.tool_calls})
        return out


def finish_reason(reason: str | None, called: bool) -> str | None:
    """OpenAI's `tool_calls` when an answer that ended by itself called tools."""
    return "tool_calls" if called and reason == "stop" else reason


async def compiled(engine: AsyncEngine, spec: ConstraintSpec | None) -> ConstraintSpec | None:
    """Compile a request's constraint off the event loop and off the engine thread (errors
    are 400s before anything is queued; the engine then finds it in the cache)."""
    if spec is not None:
        await anyio.to_thread.run_sync(engine.engine.guided.compile, spec)
    return spec


async def chat_constraint(
    engine: AsyncEngine, plan: ToolPlan | None, output: ConstraintSpec | None
) -> ConstraintSpec | None:
    if plan is None:
        return await compiled(engine, output)

    def build() -> ConstraintSpec | None:
        return plan.constraint(engine.engine.guided.compiler, output)

    return await compiled(engine, await anyio.to_thread.run_sync(build))


def ollama_constraint(fmt: str | dict[str, Any] | None) -> ConstraintSpec | None:
    """Ollama's `format`: "json" (any JSON object) or a JSON schema."""
    if fmt is None or fmt == "":
        return None
    if fmt == "json":
        return ConstraintSpec.json_object(param="format")
    if isinstance(fmt, str):
        raise RequestError(f'format must be "json" or a JSON schema, not {fmt!r}', param="format")
    return ConstraintSpec.json_schema(fmt, param="format")


def uses_tools(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("tool_calls") or m["role"] == "tool" for m in messages)


def chat_prompt_text(
    template: ChatTemplate, messages: list[dict[str, Any]], plan: ToolPlan | None
) -> str:
    """The prompt of a conversation that offers tools or holds calls and results."""
    fmt = plan.fmt if plan is not None else detect_format(template.source)
    return render_with_tools(template, fmt, messages, plan.tools if plan else None)
