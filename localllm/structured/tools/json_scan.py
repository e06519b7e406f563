"""Where a JSON object's members lie in text that may still be growing (streamed output).

`scan_object(text, pos)` walks one JSON object starting at `text[pos]` without building it:
for each top-level key it records where the value starts and ends, so a streaming parser
can pass `function.arguments` on as it arrives, exactly, without waiting for the object to
close. Values that are not complete yet have no end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

_WS = " \t\r\n"


@dataclass
class Member:
    key: str
    start: int  # first character of the value
    end: int | None = None  # one past its last character; None while it is still open


@dataclass
class ObjectScan:
    members: list[Member] = field(default_factory=list)
    end: int | None = None  # one past the closing brace; None while open
    bad: bool = False  # the text is not a JSON object (it can never become one)

    def member(self, key: str) -> Member | None:
        return next((m for m in self.members if m.key == key), None)


def skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _string_end(text: str, pos: int) -> int | None:
    """text[pos] is '"': one past the closing quote, or None if it has not come yet."""
    i = pos + 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        i += 1
    return None


def value_end(text: str, pos: int) -> int | None:
    """One past the JSON value starting at text[pos], or None if it is not complete yet.
    A number or literal at the very end of the text is not complete (more digits may come)."""
    if pos >= len(text):
        return None
    c = text[pos]
    if c == '"':
        return _string_end(text, pos)
    if c not in "{[":
        i = pos
        while i < len(text) and text[i] not in _WS + ",]}":
            i += 1
        return i if i < len(text) else None
    depth, i = 0, pos
    while i < len(text):
        c = text[i]
        if c == '"':
            end = _string_end(text, i)
            if end is None:
                return None
            i = end
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def scan_object(text: str, pos: int) -> ObjectScan:
    """Members of the object starting at text[pos] (which must be '{')."""
    out = ObjectScan()
    if pos >= len(text):
        return out
    if text[pos] != "{":
        out.bad = True
        return out
    i = skip_ws(text, pos + 1)
    while i < len(text):
        if text[i] == "}":
            out.end = i + 1
            return out
        if text[i] != '"':
            out.bad = True
            return out
        key_end = _string_end(text, i)
        if key_end is None:
            return out
        key = json.loads(text[i:key_end])
        i = skip_ws(text, key_end)
        if i >= len(text):
            return out
        if text[i] != ":":
            out.bad = True
            return out
        i = skip_ws(text, i + 1)
        if i >= len(text):
            return out
        member = Member(key, i, value_end(text, i))
        out.members.append(member)
        if member.end is None:
            return out
        i = skip_ws(text, member.end)
        if i < len(text) and text[i] == ",":
            i = skip_ws(text, i + 1)
    return out
