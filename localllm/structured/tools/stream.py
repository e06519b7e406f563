"""Streamed answers -> OpenAI chat deltas: `content` pieces and `tool_calls` pieces.

Each `feed` re-reads the whole answer so far (answers are short; the scan is linear) and
emits only what is new: a call's first delta carries its index, id, type and name with
empty arguments, later ones carry the next piece of `function.arguments`. Concatenating the
pieces gives exactly the final arguments, which is what OpenAI clients do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from localllm.structured.tools.formats import ToolFormat
from localllm.structured.tools.parser import ParsedAnswer, parse_answer


@dataclass
class StreamDelta:
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.content or self.tool_calls)


class ToolStreamParser:
    def __init__(self, fmt: ToolFormat, parallel: bool = True) -> None:
        self.fmt = fmt
        self.parallel = parallel and fmt.parallel
        self.text = ""
        self._content = ""  # content sent so far
        self._ids: list[str] = []  # ids of announced calls
        self._args_sent: list[int] = []

    def feed(self, delta: str) -> StreamDelta:
        self.text += delta
        return self._diff(parse_answer(self.fmt, self.text, final=False))

    def finish(self) -> tuple[StreamDelta, ParsedAnswer]:
        """The last delta and the whole parsed answer (calls trimmed to one if not parallel)."""
        parsed = parse_answer(self.fmt, self.text, final=True)
        if not self.parallel:
            parsed.calls = parsed.calls[:1]
        return self._diff(parsed), parsed

    @property
    def call_ids(self) -> list[str]:
        return list(self._ids)

    def _diff(self, parsed: ParsedAnswer) -> StreamDelta:
        out = StreamDelta()
        content = parsed.content  # grows while streaming; a final strip sends nothing more
        if content.startswith(self._content):
            out.content = content[len(self._content) :]
            self._content = content
        calls = parsed.calls if self.parallel else parsed.calls[:1]
        for i, call in enumerate(calls):
            if call.name is None:
                break
            if i == len(self._ids):
                self._ids.append(self.fmt.new_call_id())
                self._args_sent.append(0)
                out.tool_calls.append(
                    {
                        "index": i,
                        "id": self._ids[i],
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                )
            piece = call.arguments[self._args_sent[i] :]
            if piece:
                self._args_sent[i] = len(call.arguments)
                out.tool_calls.append({"index": i, "function": {"arguments": piece}})
        return out
