"""Where answers come from: the in-process AsyncEngine, or a remote OpenAI-compatible server
(remote.py). Both stream `Chunk`s; the final chunk carries `ReplyStats`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from localllm.core import SamplingParams
from localllm.errors import LocalLLMError
from localllm.sampling_defaults import CHAT
from localllm.tui.context import ChatMessage

if TYPE_CHECKING:
    from localllm.config import EngineConfig
    from localllm.engine.async_engine import AsyncEngine
    from localllm.engine.engine import LLMEngine
    from localllm.engine.progress import ProgressFn


class BackendError(LocalLLMError):
    """A reply failed (engine error, server error, connection lost); shown in the chat."""


@dataclass
class ChatSettings:
    temperature: float = CHAT.temperature
    top_p: float = CHAT.top_p
    max_tokens: int = CHAT.max_tokens

    def __post_init__(self) -> None:
        SamplingParams(max_tokens=self.max_tokens, temperature=self.temperature, top_p=self.top_p)


@dataclass
class ReplyStats:
    finish_reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    ttft: float | None = None  # seconds
    tokens_per_s: float | None = None
    spec_drafted: int = 0  # n-gram draft tokens verified
    spec_accepted: int = 0  # of them, accepted

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Chunk:
    text: str = ""
    stats: ReplyStats | None = None  # set on the last chunk only


class Backend(Protocol):
    model_name: str
    context_size: int | None

    def token_counter(self) -> Callable[[list[ChatMessage]], int] | None: ...

    def stream(
        self, messages: list[ChatMessage], settings: ChatSettings
    ) -> AsyncGenerator[Chunk, None]: ...

    def stop(self) -> None: ...

    async def pool_usage(self) -> tuple[int, int] | None: ...  # (used KV blocks, total)

    async def close(self) -> None: ...


class LocalBackend:
    """Chat over an in-process AsyncEngine (which `--serve` may share with the HTTP API)."""

    def __init__(self, engine: AsyncEngine, model_name: str, owns_engine: bool = True) -> None:
        self.engine = engine
        self.model_name = model_name
        self.context_size: int | None = engine.max_model_len
        self.owns_engine = owns_engine
        self.request_id: str | None = None  # the reply being generated, if any

    @classmethod
    async def load(cls, cfg: EngineConfig, progress: ProgressFn | None = None) -> LocalBackend:
        """Load the model off the UI thread (progress gets each start-up stage, on that
        thread); ModelLoadError etc. propagate to the caller."""
        from localllm.engine.async_engine import AsyncEngine

        engine = await asyncio.to_thread(AsyncEngine.from_config, cfg, progress)
        return cls(engine, Path(cfg.model).name)

    @property
    def template_fallback(self) -> str | None:
        """The built-in chat template in use when the model has none, else None."""
        template = self.engine.chat_template
        return template.name if template.is_builtin else None

    def prompt_ids(self, messages: list[ChatMessage]) -> list[int]:
        template = self.engine.chat_template
        text = template.render(messages, add_generation_prompt=True)
        return self.engine.tokenizer.encode(text, add_special=not template.renders_bos)

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        return len(self.prompt_ids(messages))

    def token_counter(self) -> Callable[[list[ChatMessage]], int]:
        return self.count_tokens

    async def stream(
        self, messages: list[ChatMessage], settings: ChatSettings
    ) -> AsyncGenerator[Chunk, None]:
        params = SamplingParams(
            max_tokens=settings.max_tokens, temperature=settings.temperature, top_p=settings.top_p
        )
        ids = self.prompt_ids(messages)
        self.request_id = rid = uuid.uuid4().hex
        try:
            # aclosing: leaving this loop early (Esc) closes generate(), which aborts the request
            async with aclosing(self.engine.generate(ids, params, rid, continuation=False)) as evs:
                async for ev in evs:
                    if ev.error:
                        raise BackendError(ev.error)
                    if not ev.finished:
                        yield Chunk(ev.text)
                        continue
                    yield Chunk(
                        ev.text, _local_stats(ev.finish_reason or "stop", ev.usage, ev.stats)
                    )
        finally:
            self.request_id = None

    def stop(self) -> None:
        if self.request_id is not None:
            self.engine.abort(self.request_id)

    async def pool_usage(self) -> tuple[int, int] | None:
        def read(e: LLMEngine) -> tuple[int, int]:
            snap = e.snapshot()
            return snap.blocks_used, snap.blocks_total

        return await asyncio.to_thread(self.engine.run_sync, read)

    async def close(self) -> None:
        if self.owns_engine:
            await asyncio.to_thread(self.engine.shutdown)


def _local_stats(reason: str, usage: object, stats: dict | None) -> ReplyStats:
    stats = stats or {}
    tpot = stats.get("tpot")
    return ReplyStats(
        finish_reason=reason,
        prompt_tokens=getattr(usage, "prompt_tokens", 0),
        completion_tokens=getattr(usage, "completion_tokens", 0),
        cached_tokens=getattr(usage, "cached_tokens", 0),
        ttft=stats.get("ttft"),
        tokens_per_s=(1.0 / tpot) if tpot else None,
        spec_drafted=getattr(usage, "spec_drafted", 0),
        spec_accepted=getattr(usage, "spec_accepted", 0),
    )
