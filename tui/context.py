"""Fit a conversation into the context window, visibly: drop the oldest whole turns (the
system prompt always stays) until prompt + max_tokens fits, or refuse when even the newest
message does not fit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from localllm.errors import LocalLLMError

ChatMessage = dict[str, str]  # {"role": ..., "content": ...}


class ContextOverflow(LocalLLMError):
    """Even the newest message (with the system prompt) leaves no room for an answer."""


@dataclass
class Fitted:
    messages: list[ChatMessage]  # what to send: system prompt (if any) + the kept turns
    dropped: int  # how many of the oldest history messages were left out
    prompt_tokens: int | None  # tokens of the rendered prompt (None: no tokenizer here)


def _turn_starts(history: list[ChatMessage]) -> list[int]:
    """Indices where a turn starts (each user message); a leading non-user run is turn 0."""
    starts = [i for i, m in enumerate(history) if m["role"] == "user"]
    return starts if starts and starts[0] == 0 else [0, *starts]


def fit_messages(
    system_prompt: str,
    history: list[ChatMessage],
    count_tokens: Callable[[list[ChatMessage]], int] | None,
    context_size: int | None,
    max_tokens: int,
) -> Fitted:
    """Keep the longest suffix of whole turns whose prompt fits in context_size - max_tokens.

    count_tokens(messages) gives the tokens of the rendered prompt; without it (or without a
    context size) everything is sent and the server decides.
    """
    head = [{"role": "system", "content": system_prompt}] if system_prompt.strip() else []
    if count_tokens is None or context_size is None:
        return Fitted(head + history, 0, None)
    budget = context_size - max_tokens
    if budget <= 0:
        raise ContextOverflow(
            f"max tokens ({max_tokens}) leaves no room in the {context_size}-token context; "
            "lower it in the settings (Ctrl+S)"
        )
    starts = _turn_starts(history)
    # binary search for the first turn to keep (fewer turns -> fewer tokens)
    lo, hi = 0, len(starts) - 1
    best: tuple[int, int] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        n = count_tokens(head + history[starts[mid] :])
        if n <= budget:
            best, hi = (mid, n), mid - 1
        else:
            lo = mid + 1
    if best is None:
        n_last = count_tokens(head + history[starts[-1] :])
        raise ContextOverflow(
            f"the message is too long: {n_last} prompt tokens + {max_tokens} max tokens exceed "
            f"the {context_size}-token context; shorten it, the system prompt, or max tokens"
        )
    first, n = best
    return Fitted(head + history[starts[first] :], starts[first], n)
