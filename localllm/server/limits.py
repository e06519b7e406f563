"""llama.cpp's per-request limits on one choice's event stream, applied in the server.

- `t_max_predict_ms`: once a newline has been generated, generation stops when more than
  this many ms have passed since the first generated token (llama-server's rule).
- `n_indent`: generation stops at the first line (after the first newline) whose
  indentation is below `n_indent` columns, cutting that line after its indentation
  (llama-server's rule, for FIM completions that must stay inside the current block).
- `t_max_prompt_ms`: the prompt phase (until the first token) may take at most this long;
  llama-server documents the field without enforcing it. Here the answer then ends with no
  text (stop_type "limit") and the prompt keeps being processed into the prefix cache in the
  background (`warmer.PromptWarmer`), so the editor's next request starts from it.

A stopped stream ends with a synthesized final event (finish_reason "length"); leaving the
upstream iterator aborts the engine request, which frees its KV blocks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from localllm.core import TokenEvent, Usage
from localllm.server.generation import primed


@dataclass(frozen=True)
class Limits:
    n_indent: int = 0
    t_max_predict_ms: int = -1

    @property
    def active(self) -> bool:
        return self.n_indent > 0 or self.t_max_predict_ms > 0


class PromptTimeout(Exception):
    """The prompt phase took longer than t_max_prompt_ms."""


def indent_cut(text: str, n_indent: int, start: int = 0) -> tuple[int | None, int]:
    """(cut position or None, where the next scan starts). Lines after the first newline are
    checked from `start`; a line with text indented below n_indent is cut after its indent.
    Blank lines never end the block."""
    line = text.find("\n", start)
    while line != -1:
        pos = line + 1
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos == len(text):
            return None, line  # the line has no text yet: look at it again later
        if pos - (line + 1) < n_indent and text[pos] != "\n":
            return pos, line
        line = text.find("\n", line + 1)
    return None, len(text)


def _final(ev: TokenEvent, text: str, prompt_len: int, n_tokens: int) -> TokenEvent:
    return TokenEvent(
        ev.request_id,
        text,
        ev.token_ids,
        ev.logprobs,
        finish_reason="length",
        usage=Usage(prompt_len, n_tokens),
    )


async def limited(
    events: AsyncIterator[tuple[int, TokenEvent]],
    limits: Limits,
    prompt_len: int,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[tuple[int, TokenEvent]]:
    """One choice's events with `limits` applied (see the module docstring)."""
    it = aiter(events)
    text, n_tokens, scan = "", 0, 0
    first: float | None = None
    budget = limits.t_max_predict_ms / 1000
    try:
        while True:
            timeout = None
            if budget > 0 and first is not None and "\n" in text:
                timeout = max(first + budget - clock(), 0.0)
            try:
                index, ev = await asyncio.wait_for(anext(it), timeout)
            except StopAsyncIteration:
                return
            except TimeoutError:
                yield 0, _final(TokenEvent(""), "", prompt_len, n_tokens)
                return
            if ev.finished:
                yield index, ev
                return
            first = first if first is not None or not ev.token_ids else clock()
            n_tokens += len(ev.token_ids)
            before = len(text)
            text += ev.text
            if limits.n_indent > 0:
                cut, scan = indent_cut(text, limits.n_indent, scan)
                if cut is not None:
                    yield index, _final(ev, text[before:cut], prompt_len, n_tokens)
                    return
            yield index, ev
    finally:
        await it.aclose()  # type: ignore[attr-defined]


async def first_within(
    events: AsyncIterator[tuple[int, TokenEvent]], t_max_prompt_ms: int
) -> AsyncIterator[tuple[int, TokenEvent]]:
    """`events`, or PromptTimeout when the first one takes longer than t_max_prompt_ms."""
    try:
        return await primed(events, t_max_prompt_ms / 1000)
    except TimeoutError:
        raise PromptTimeout() from None
