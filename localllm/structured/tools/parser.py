"""The model's answer -> content text and OpenAI tool calls, also while it streams.

`parse_answer(fmt, text, final)` reads everything generated so far. Text that might still
turn into a call marker (`<tool_` at the end of a streamed answer) is held back from the
content until it is decided. Inside a call the JSON is scanned, not parsed, so the
`arguments` text is known character by character while it streams.
`ToolStreamParser` turns successive parses into OpenAI deltas: content deltas, then per call
one header (index, id, name) followed by pieces of `function.arguments`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from localllm.structured.tools.formats import ToolFormat
from localllm.structured.tools.json_scan import ObjectScan, scan_object, skip_ws

NAME_KEY = "name"
ARG_KEYS = ("arguments", "parameters")
PYTHON_TAG = "<|python_tag|>"  # Llama 3.1 puts it before calls; harmless elsewhere


@dataclass
class ParsedCall:
    name: str | None  # None until the name string is complete
    arguments: str  # the arguments JSON text so far
    complete: bool  # the call's JSON object is closed


@dataclass
class ParsedAnswer:
    content: str  # text outside the calls that is safe to show now
    calls: list[ParsedCall] = field(default_factory=list)


def _held_back(text: str, marker: str) -> int:
    """Length of the longest suffix of text that is a proper prefix of marker."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


def _call_start(fmt: ToolFormat, text: str, final: bool) -> tuple[int | None, int]:
    """(index where the call part starts or None, how much content to hold back)."""
    head = skip_ws(text, 0)
    if text.startswith(PYTHON_TAG, head):
        head = skip_ws(text, head + len(PYTHON_TAG))
    undecided = (None, 0) if final else (None, len(text))
    if not fmt.start:  # the answer itself is the call: an object whose first key is "name"
        if head >= len(text):
            return undecided
        if text[head] != "{":
            return None, 0
        scan = scan_object(text, head)
        if scan.members and scan.members[0].key == NAME_KEY:
            return head, 0
        return undecided if not scan.members and not scan.bad and scan.end is None else (None, 0)
    if fmt.bare_start and text.startswith(fmt.bare_start, head):
        nxt = skip_ws(text, head + len(fmt.bare_start))
        if nxt >= len(text):
            return undecided
        if text[nxt] == "{":
            return head, 0
    at = text.find(fmt.start)
    if at >= 0:
        return at, 0
    return None, 0 if final else _held_back(text, fmt.start)


def _arguments(text: str, scan: ObjectScan) -> str:
    member = next((m for m in (scan.member(k) for k in ARG_KEYS) if m is not None), None)
    if member is None:
        return "{}" if scan.end is not None else ""
    value = text[member.start : member.end if member.end is not None else len(text)]
    if value.startswith('"'):  # arguments written as a JSON string: its content, once whole
        return str(json.loads(value)) if member.end is not None else ""
    return value


def _after(text: str, pos: int, literal: str, final: bool) -> int | None | bool:
    """After optional whitespace, `literal` at pos: the index after it; False if something
    else is there; None if the text ends on a prefix of it (not final: wait)."""
    lit = literal.strip()
    pos = skip_ws(text, pos)
    if not lit:
        return pos
    if text.startswith(lit, pos):
        return pos + len(lit)
    rest = text[pos:]
    return None if not final and lit.startswith(rest) else False


def _one_call(text: str, pos: int) -> tuple[ParsedCall | None, int | None]:
    """The call object at pos (after whitespace): (call, end) / (call, None) if open."""
    pos = skip_ws(text, pos)
    scan = scan_object(text, pos)
    if scan.bad:
        return None, None
    name_m = scan.member(NAME_KEY)
    name = json.loads(text[name_m.start : name_m.end]) if name_m and name_m.end else None
    call = ParsedCall(name if isinstance(name, str) else None, _arguments(text, scan), False)
    call.complete = scan.end is not None
    return call, scan.end


def _parse_calls(
    fmt: ToolFormat, text: str, pos: int, final: bool
) -> tuple[list[ParsedCall], int | None]:
    """Calls from pos on and where trailing content starts (None: no trailing content yet)."""
    calls: list[ParsedCall] = []
    if fmt.list_open:
        opened = _after(text, pos, fmt.list_open, final)
        if opened is False and fmt.bare_start:
            opened = _after(text, pos, fmt.bare_start, final)
        if not isinstance(opened, int) or opened is False:
            return calls, None if opened is None else pos
        pos = opened
    while True:
        if fmt.open:
            opened = _after(text, pos, fmt.open, final)
            if opened is None:
                return calls, None
            if opened is False:
                return calls, pos
            pos = opened
        call, end = _one_call(text, pos)
        if call is None:
            return calls, pos
        calls.append(call)
        if end is None:
            return calls, None
        closed = _after(text, end, fmt.close, final)
        if not isinstance(closed, int) or closed is False:
            return calls, None if closed is None else end
        pos = closed
        if fmt.list_open:
            sep = skip_ws(text, pos)
            if text.startswith(",", sep):
                pos = sep + 1
                continue
            done = _after(text, pos, fmt.list_close, final)
            return calls, (done if isinstance(done, int) and done is not False else None)
        if not fmt.open:  # a single call is the whole answer
            return calls, pos
        if skip_ws(text, pos) >= len(text) and not final:
            return calls, None


def parse_answer(fmt: ToolFormat, text: str, final: bool = True) -> ParsedAnswer:
    """Content and calls in `text`; final=False while the answer is still streaming."""
    start, hold = _call_start(fmt, text, final)
    if start is None:
        return ParsedAnswer(text[: len(text) - hold])
    calls, tail = _parse_calls(fmt, text, start, final)
    content = text[:start]
    if tail is not None:
        rest = text[tail:]
        if final and fmt.open and fmt.open.strip().startswith(rest.strip()):
            rest = ""  # the start of a call that was cut off (max_tokens): not content
        content += rest
    if final:
        calls = [c for c in calls if c.name is not None]
        if calls:
            content = content.strip()
    return ParsedAnswer(content, calls)
