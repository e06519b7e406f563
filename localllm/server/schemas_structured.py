"""Request bodies for structured output and tool calls (OpenAI's shapes, llama.cpp's fields).

`response_format` (both completion endpoints), llama.cpp's `grammar` (GBNF) and
`json_schema` (a bare schema), and on chat `tools`, `tool_choice`, `parallel_tool_calls`
plus the `tool_calls` / `tool_call_id` of earlier turns. What they do: docs/structured-output.md.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from localllm.server.schemas import ChatCompletionRequest, ChatMessage, CompletionRequest, _Body

FUNCTION_NAME = r"^[a-zA-Z0-9_-]{1,64}$"  # OpenAI's rule for function and schema names
MAX_TOOLS = 128


class JsonSchemaFormat(_Body):
    name: str = Field("response", pattern=FUNCTION_NAME)
    description: str | None = None
    schema_: dict[str, Any] | bool | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class FunctionDef(_Body):
    name: str = Field(pattern=FUNCTION_NAME)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDef(_Body):
    type: Literal["function"]
    function: FunctionDef


class FunctionName(_Body):
    name: str


class NamedToolChoice(_Body):
    type: Literal["function"]
    function: FunctionName


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class ToolCallFunction(_Body):
    name: str
    arguments: str = "{}"  # a JSON object as text, as OpenAI sends it


class ToolCallIn(_Body):
    """A call in an earlier assistant turn."""

    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction


class OutputFormatFields(_Body):
    """Constrained output, on every generation body: at most one of the three."""

    response_format: ResponseFormat | None = None
    grammar: str | None = None  # llama.cpp: a GBNF grammar
    json_schema: dict[str, Any] | None = None  # llama.cpp: a bare JSON schema


class ToolFields(_Body):
    tools: list[ToolDef] | None = Field(None, max_length=MAX_TOOLS)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None


class ToolChatMessage(ChatMessage):
    """A chat turn that may carry the calls an assistant made, or a tool's result."""

    tool_calls: list[ToolCallIn] | None = None  # assistant turns
    tool_call_id: str | None = None  # tool turns: the call this answers


class StructuredChatRequest(ChatCompletionRequest, OutputFormatFields, ToolFields):
    messages: list[ToolChatMessage] = Field(min_length=1)  # type: ignore[assignment]


class StructuredCompletionRequest(CompletionRequest, OutputFormatFields):
    pass
