"""Run a request's jobs (n choices x prompts) on the engine as one merged event stream.

Each job is pumped by its own task into one queue, so choices interleave as the engine
produces them. Closing the stream (client gone, error) cancels the tasks, and leaving
`AsyncEngine.generate` early aborts each request in the engine, which frees its KV blocks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field

import anyio
from starlette.requests import Request

from localllm.core import TokenEvent, TokenLogprob, Usage
from localllm.engine.async_engine import AsyncEngine
from localllm.server import responses as R
from localllm.server.errors import APIError, error_body
from localllm.server.metrics import ServerMetrics
from localllm.server.params import Job
from localllm.server.sse import DONE, sse_data


async def merged_events(
    engine: AsyncEngine,
    jobs: list[Job],
    continuation: bool,
    metrics: ServerMetrics,
    endpoint: str,
    request_id: str,
) -> AsyncIterator[tuple[int, TokenEvent]]:
    """(choice index, event) until every job has finished; the first job error is raised."""
    q: asyncio.Queue[tuple[int, TokenEvent | BaseException]] = asyncio.Queue()

    async def pump(job: Job) -> None:
        obs = metrics.observer(endpoint)
        try:
            async for ev in engine.generate(
                job.prompt_ids, job.params, f"{request_id}-{job.index}", continuation
            ):
                obs.on_event(ev)
                q.put_nowait((job.index, ev))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - handed to the consumer
            q.put_nowait((job.index, e))

    tasks = [asyncio.create_task(pump(j)) for j in jobs]
    try:
        remaining = len(jobs)
        while remaining:
            index, item = await q.get()
            if isinstance(item, BaseException):
                raise item
            yield index, item
            if item.finished:
                remaining -= 1
    finally:
        for t in tasks:
            t.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.gather(*tasks, return_exceptions=True)


async def primed(
    events: AsyncIterator[tuple[int, TokenEvent]], timeout: float | None = None
) -> AsyncIterator[tuple[int, TokenEvent]]:
    """Wait for the first event before answering, so a bad request still gets a plain 4xx
    (the engine rejects requests before it yields anything); then replay it and the rest.
    With `timeout` (seconds), a first event that takes longer raises TimeoutError (and the
    events are closed)."""
    it = aiter(events)
    try:
        first = await asyncio.wait_for(anext(it), timeout)
    except TimeoutError:
        await it.aclose()  # type: ignore[attr-defined]
        raise

    async def replay() -> AsyncIterator[tuple[int, TokenEvent]]:
        try:
            yield first
            async for item in it:
                yield item
        finally:
            await it.aclose()  # type: ignore[attr-defined]

    return replay()


@dataclass
class ChoiceResult:
    """Everything one choice produced, for a non-streaming answer."""

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    stats: dict | None = None


def check_event(ev: TokenEvent) -> None:
    if ev.finish_reason == "error":
        raise APIError(500, ev.error or "the engine failed on this request", code="engine_error")


async def collect(
    events: AsyncIterator[tuple[int, TokenEvent]], n_choices: int, request: Request
) -> list[ChoiceResult]:
    """All choices of a non-streaming request; a client that hangs up first aborts them."""
    work = asyncio.ensure_future(_gather(events, n_choices))
    gone = False

    async def watch() -> None:
        nonlocal gone
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gone = True
        work.cancel()

    watcher = asyncio.create_task(watch())
    try:
        return await work
    except asyncio.CancelledError:
        if gone:  # not our task being cancelled: the client left; nothing to answer
            raise ClientGone() from None
        raise
    finally:
        watcher.cancel()


class ClientGone(Exception):
    """A non-streaming client hung up before its answer was ready (handled quietly)."""


async def _gather(
    events: AsyncIterator[tuple[int, TokenEvent]], n_choices: int
) -> list[ChoiceResult]:
    results = [ChoiceResult() for _ in range(n_choices)]
    async for index, ev in events:
        check_event(ev)
        r = results[index]
        r.text += ev.text
        r.token_ids += ev.token_ids
        r.logprobs += ev.logprobs or []
        if ev.finished:
            r.finish_reason, r.usage, r.stats = ev.finish_reason, ev.usage, ev.stats
    return results


async def stream_choices(
    events: AsyncIterator[tuple[int, TokenEvent]],
    head: dict,
    opening: Iterable[dict],
    render: Callable[[int, TokenEvent], Iterable[dict]],
    n_choices: int,
    n: int,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    """OpenAI's stream layout: the `opening` choice chunks, then the chunks `render` makes of
    each event, then (with include_usage) a usage chunk, then [DONE]. An error after the status
    line has gone out is reported in-band."""
    head = {**head, "usage": None} if include_usage else head

    def chunk(choice: dict) -> bytes:
        return sse_data({**head, "choices": [choice]})

    for choice in opening:
        yield chunk(choice)
    usages: list[Usage | None] = [None] * n_choices
    try:
        async for index, ev in events:
            check_event(ev)
            for choice in render(index, ev):
                yield chunk(choice)
            if ev.finished:
                usages[index] = ev.usage
    except Exception as e:  # noqa: BLE001 - the status line is sent: report in-band
        yield sse_data(error_body(e))
        yield DONE
        return
    if include_usage:
        yield sse_data({**head, "choices": [], "usage": R.usage_body(usages, n)})
    yield DONE
