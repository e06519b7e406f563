"""Chat as a client of any OpenAI-compatible server (`localllm serve`, llama.cpp, vLLM ...)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, cast

from localllm.tui.backend import BackendError, ChatSettings, Chunk, ReplyStats
from localllm.tui.context import ChatMessage

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam


def api_base(url: str) -> str:
    """The OpenAI base URL: `http://host:8000` and `http://host:8000/v1` both give `.../v1`."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def _explain(url: str, e: Exception) -> str:
    import openai

    if isinstance(e, openai.APITimeoutError):
        return f"the server at {url} did not answer in time"
    if isinstance(e, openai.APIConnectionError):
        cause = e.__cause__ or e
        return f"cannot reach the server at {url} ({type(cause).__name__}: {cause})"
    if isinstance(e, openai.APIStatusError):
        detail = e.message or ""
        return f"the server at {url} answered {e.status_code}: {detail}"
    return f"{type(e).__name__}: {e}"


class RemoteBackend:
    """OpenAI chat completions over HTTP with SSE streaming (the official `openai` client)."""

    def __init__(
        self, url: str, model: str | None = None, api_key: str | None = None, timeout: float = 10.0
    ) -> None:
        import openai

        self.url = url
        self.client = openai.AsyncOpenAI(
            base_url=api_base(url), api_key=api_key or "none", max_retries=0, timeout=timeout
        )
        self.model_name = model or ""
        self.context_size: int | None = None  # filled from /v1/models when the server says

    async def _list_models(self, load_wait: float) -> Any:
        """GET /v1/models; a 503 (the server is still loading its model) is retried."""
        import openai

        deadline = time.monotonic() + load_wait
        while True:
            try:
                return await self.client.models.list()
            except openai.APIStatusError as e:
                if e.status_code != 503 or time.monotonic() > deadline:
                    raise BackendError(_explain(self.url, e)) from None
            except Exception as e:  # noqa: BLE001 - any failure is shown as one line
                raise BackendError(_explain(self.url, e)) from None
            await asyncio.sleep(0.5)

    async def connect(self, load_wait: float = 120.0) -> None:
        """List the server's models; pick the first unless one was named. Raises BackendError."""
        page = await self._list_models(load_wait)
        models = list(page.data)
        if not models and not self.model_name:
            raise BackendError(f"the server at {self.url} lists no models")
        chosen = next((m for m in models if m.id == self.model_name), models[0] if models else None)
        if chosen is not None:
            self.model_name = chosen.id
            extra = getattr(chosen, "model_extra", None) or {}
            size = extra.get("max_model_len") or extra.get("context_length")
            self.context_size = int(size) if isinstance(size, int) else None

    def token_counter(self) -> None:
        """No tokenizer on this side: the server checks the context length itself."""
        return None

    async def stream(
        self, messages: list[ChatMessage], settings: ChatSettings
    ) -> AsyncGenerator[Chunk, None]:
        t0 = time.perf_counter()
        first: float | None = None
        reason, usage = "stop", None
        try:
            resp = await self.client.chat.completions.create(
                model=self.model_name,
                messages=cast("list[ChatCompletionMessageParam]", messages),
                stream=True,
                temperature=settings.temperature,
                top_p=settings.top_p,
                max_tokens=settings.max_tokens,
                stream_options={"include_usage": True},
            )
            async with resp as chunks:  # closing the response drops the connection
                async for ch in chunks:
                    usage = ch.usage or usage
                    for choice in ch.choices:
                        reason = choice.finish_reason or reason
                        if choice.delta and choice.delta.content:
                            first = first or time.perf_counter()
                            yield Chunk(choice.delta.content)
        except Exception as e:  # noqa: BLE001
            raise BackendError(_explain(self.url, e)) from None
        yield Chunk("", _remote_stats(reason, usage, t0, first, time.perf_counter()))

    def stop(self) -> None:
        """Nothing to do here: cancelling the stream closes the HTTP response."""

    async def pool_usage(self) -> tuple[int, int] | None:
        return None

    async def close(self) -> None:
        await self.client.close()


def _remote_stats(
    reason: str, usage: Any, t0: float, first: float | None, end: float
) -> ReplyStats:
    n = getattr(usage, "completion_tokens", 0) or 0
    details = getattr(usage, "prompt_tokens_details", None)
    guesses = getattr(usage, "completion_tokens_details", None)  # speculative drafts
    accepted = getattr(guesses, "accepted_prediction_tokens", 0) or 0
    rejected = getattr(guesses, "rejected_prediction_tokens", 0) or 0
    gen_time = end - first if first else 0.0
    return ReplyStats(
        finish_reason=reason,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=n,
        cached_tokens=getattr(details, "cached_tokens", 0) or 0,
        ttft=(first - t0) if first else None,
        tokens_per_s=(n - 1) / gen_time if n > 1 and gen_time > 0 else None,
        spec_drafted=accepted + rejected,
        spec_accepted=accepted,
    )
