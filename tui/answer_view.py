"""How a finished assistant answer is shown: JSON pretty-printed, tool calls as blocks.

The stored text stays exactly what the model wrote (it goes back to the model in the next
turn); only the view changes. An answer that is one JSON value is shown indented in a json
code block. Tool calls the model wrote in any format we parse (`<tool_call>` blocks,
Mistral's call list, a Llama 3 call object) are shown as "Tool call `name`" with their
arguments indented, the rest of the text as it was.
"""

from __future__ import annotations

import json
from typing import Any

from localllm.structured.tools.formats import FORMATS
from localllm.structured.tools.parser import parse_answer


def _json_block(value: Any) -> str:
    return "```json\n" + json.dumps(value, indent=2, ensure_ascii=False) + "\n```"


def _json_value(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        raise ValueError("not a JSON object or array")
    return json.loads(stripped)


def _tool_calls_view(text: str) -> str | None:
    for fmt in FORMATS.values():
        parsed = parse_answer(fmt, text)
        if not parsed.calls:
            continue
        parts = [parsed.content] if parsed.content else []
        for call in parsed.calls:
            try:
                args = _json_block(json.loads(call.arguments or "{}"))
            except ValueError:
                args = "```\n" + call.arguments + "\n```"
            parts.append(f"**Tool call** `{call.name}`\n\n{args}")
        return "\n\n".join(parts)
    return None


def answer_markdown(text: str) -> str:
    """The Markdown shown for a finished assistant answer."""
    try:
        return _json_block(_json_value(text))
    except ValueError:
        pass
    return _tool_calls_view(text) or text
