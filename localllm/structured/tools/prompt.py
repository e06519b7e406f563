"""Tools into the prompt: through the model's template, or our documented generic prompt.

A template that speaks a known tool format gets `tools` (OpenAI's list) and the history as
Hugging Face templates expect it: an assistant turn's `tool_calls[].function.arguments` as
a decoded object, `tool` turns with their `tool_call_id`. Any other template gets the
generic format: `GENERIC_PROMPT` (the tools as JSON, one per line, and how to call them)
joined to the system message, earlier calls written back as `<tool_call>` blocks and tool
results sent as a user turn of `<tool_response>` blocks, so every chat model can use tools.
"""

from __future__ import annotations

import json
from typing import Any

from localllm.chat_template import ChatTemplate
from localllm.errors import RequestError
from localllm.structured.tools.formats import ToolFormat

GENERIC_PROMPT = (
    "You can call these tools; each line is one tool with the JSON schema of its "
    "parameters:\n<tools>\n{tools}\n</tools>\n"
    "To call tools, answer with one block per call and nothing else:\n"
    '<tool_call>\n{{"name": <tool name>, "arguments": <the arguments as a JSON object>}}\n'
    "</tool_call>\n"
    "Each result comes back in a <tool_response></tool_response> block. "
    "If no tool is needed, answer normally."
)


def _decoded_arguments(call: dict[str, Any], where: str) -> dict[str, Any]:
    fn = dict(call.get("function") or {})
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            raise RequestError(f"{where}: arguments are not valid JSON", param="messages") from None
    fn["arguments"] = args if args is not None else {}
    return {**call, "function": fn}


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI messages as HF templates read them (fields that are None are left out)."""
    out = []
    for i, msg in enumerate(messages):
        msg = {k: v for k, v in msg.items() if v is not None}
        if msg.get("tool_calls"):
            msg["tool_calls"] = [
                _decoded_arguments(c, f"messages[{i}].tool_calls[{k}]")
                for k, c in enumerate(msg["tool_calls"])
            ]
        elif "tool_calls" in msg:
            del msg["tool_calls"]
        out.append(msg)
    return out


def _call_block(call: dict[str, Any]) -> str:
    fn = call["function"]
    body = json.dumps({"name": fn["name"], "arguments": fn["arguments"]}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def generic_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The conversation with tools, calls and results written as plain text turns."""
    listing = "\n".join(json.dumps(t["function"], ensure_ascii=False) for t in tools)
    system = GENERIC_PROMPT.format(tools=listing) if tools else ""
    out: list[dict[str, Any]] = []
    for msg in template_messages(messages):
        role, content = msg["role"], msg.get("content") or ""
        if role in ("system", "developer") and not out:
            system = f"{content}\n\n{system}" if content else system
            continue
        if msg.get("tool_calls"):
            blocks = "\n".join(_call_block(c) for c in msg["tool_calls"])
            out.append({"role": "assistant", "content": f"{content}\n{blocks}".strip()})
        elif role == "tool":
            block = f"<tool_response>\n{content}\n</tool_response>"
            if out and out[-1].get("_tool_results"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool_results": True})
        else:
            out.append({"role": role, "content": content})
    for msg in out:
        msg.pop("_tool_results", None)
    return [{"role": "system", "content": system}, *out] if system else out


def render_with_tools(
    template: ChatTemplate,
    fmt: ToolFormat,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
) -> str:
    """The prompt for a conversation that may offer tools and may hold calls and results."""
    if fmt.native:
        return template.render(template_messages(messages), tools=tools or None)
    return template.render(generic_messages(messages, tools or []))
