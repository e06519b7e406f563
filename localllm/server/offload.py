"""Prompt work (tokenizing, chat templates) off the event loop, bounded in size and time.

Tokenizers and templates are pure Python: on the loop, one 10 MB prompt stalled every
other client for seconds. Here they run in worker threads (at most `MAX_THREADS` at once),
and a request gets a 400 when its text is longer than the context could ever hold (checked
by length before any tokenizing) or when preparing it takes longer than `MAX_SECONDS`.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from localllm.errors import RequestError
from localllm.tokenizer import Tokenizer

T = TypeVar("T")
MAX_THREADS = 4
MAX_SECONDS = 20.0
SLACK = 2  # tokens of at most B bytes cover at most B input bytes; x2 for normalisation

_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = (
    weakref.WeakKeyDictionary()
)


def _limiter() -> anyio.CapacityLimiter:
    # one per event loop (a CapacityLimiter belongs to the loop it was made on)
    loop = asyncio.get_running_loop()
    if loop not in _limiters:
        _limiters[loop] = anyio.CapacityLimiter(MAX_THREADS)
    return _limiters[loop]


async def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs) in a worker thread; a 400 after MAX_SECONDS."""
    try:
        with anyio.fail_after(MAX_SECONDS):
            return await anyio.to_thread.run_sync(
                functools.partial(fn, *args, **kwargs), limiter=_limiter(), abandon_on_cancel=True
            )
    except TimeoutError:
        raise RequestError(
            f"preparing the prompt took longer than {MAX_SECONDS:g} s", code="prompt_too_slow"
        ) from None


@functools.lru_cache(maxsize=8)
def max_token_bytes(tok: Tokenizer) -> int:
    """The longest vocabulary entry in bytes (at least 4: one UTF-8 character)."""
    return max(4, max((len(tok.token_bytes(i)) for i in range(tok.vocab_size)), default=4))


def text_cap(tok: Tokenizer, max_tokens: int) -> int:
    """Characters beyond which a text certainly has more than max_tokens tokens."""
    return SLACK * max_tokens * max_token_bytes(tok)


def check_text_size(tok: Tokenizer, n_chars: int, max_model_len: int, param: str) -> None:
    if n_chars > text_cap(tok, max_model_len):
        raise RequestError(
            f"This model's maximum context length is {max_model_len} tokens, and your "
            f"{param} ({n_chars} characters) is far longer than that",
            code="context_length_exceeded",
            param=param,
        )
