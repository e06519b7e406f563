"""POST /v1/completions (text or token prompts, `suffix` for fill-in-the-middle, echo)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from localllm.core import TokenEvent
from localllm.engine.async_engine import AsyncEngine
from localllm.errors import RequestError
from localllm.server import responses as R
from localllm.server.context import Ctx, Engine
from localllm.server.generation import collect, merged_events, primed, stream_choices
from localllm.server.offload import check_text_size, off_loop
from localllm.server.params import build_jobs, check_model, check_n
from localllm.server.prompts import completion_prompts, fim_prompt_ids
from localllm.server.schemas_structured import StructuredCompletionRequest as CompletionRequest
from localllm.server.sse import EventStreamResponse
from localllm.server.structured import compiled, output_constraint

router = APIRouter()
MAX_CHOICES = 128  # prompts x n in one request


def _prompts(req: CompletionRequest, engine: AsyncEngine) -> list[list[int]]:
    """Prompt ids (runs in a worker thread)."""
    texts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
    size = sum(len(t) for t in texts if isinstance(t, str)) + len(req.suffix or "")
    check_text_size(engine.tokenizer, size, engine.max_model_len, "prompt")
    if req.suffix is None:
        return completion_prompts(engine.tokenizer, req.prompt)
    if not isinstance(req.prompt, str):
        raise RequestError("suffix needs a single string prompt", param="suffix")
    return [fim_prompt_ids(engine.tokenizer, req.prompt, req.suffix)]


def _echo_texts(req: CompletionRequest, engine: AsyncEngine, prompts: list[list[int]]) -> list[str]:
    """The prompt text each choice starts with when echo=true."""
    if not req.echo:
        return [""] * len(prompts)
    if req.logprobs is not None:
        raise RequestError("echo with logprobs is not supported (no prompt logprobs)", param="echo")
    if req.suffix is not None:
        raise RequestError("echo cannot be combined with suffix", param="echo")
    return [engine.tokenizer.decode(ids) for ids in prompts]


@router.post("/v1/completions", response_model=None)
async def completions(
    req: CompletionRequest, request: Request, ctx: Ctx, engine: Engine
) -> Response:
    check_model(ctx.settings, req.model)
    check_n(ctx.settings, req.n)
    prompts = await off_loop(_prompts, req, engine)
    if len(prompts) * req.n > MAX_CHOICES:
        raise RequestError(
            f"at most {MAX_CHOICES} choices (prompts x n) per request", param="prompt"
        )
    echo = await off_loop(_echo_texts, req, engine, prompts)
    constraint = await compiled(engine, output_constraint(req))
    jobs = build_jobs(req, prompts, engine.max_model_len, req.max_tokens, req.logprobs, constraint)
    rid = R.new_id("cmpl")
    events = merged_events(engine, jobs, True, ctx.metrics, "completions", rid)
    model, n_choices = ctx.settings.model_name, len(jobs)
    if req.stream:
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        starts = [echo[i // req.n] for i in range(n_choices)]
        body = _stream(await primed(events), rid, model, req.n, starts, include_usage)
        return EventStreamResponse(body)
    results = await collect(events, n_choices, request)
    out = R.envelope(rid, "text_completion", model)
    out["choices"] = [
        R.completion_choice(
            i,
            echo[i // req.n] + r.text,
            r.finish_reason,
            R.completion_logprobs(r.logprobs) if req.logprobs is not None else None,
        )
        for i, r in enumerate(results)
    ]
    out["usage"] = R.usage_body([r.usage for r in results], req.n)
    return JSONResponse(out)


def _stream(
    events: AsyncIterator[tuple[int, TokenEvent]],
    rid: str,
    model: str,
    n: int,
    starts: list[str],
    include_usage: bool,
) -> AsyncIterator[bytes]:
    opening = [R.completion_choice(i, text, None, None) for i, text in enumerate(starts) if text]
    offsets = [len(t) for t in starts]  # text offsets for logprobs

    def render(index: int, ev: TokenEvent) -> list[dict[str, Any]]:
        if not (ev.text or ev.logprobs or ev.finished):
            return []
        lps = R.completion_logprobs(ev.logprobs, offsets[index]) if ev.logprobs else None
        offsets[index] += sum(len(lp.token) for lp in ev.logprobs or [])
        return [R.completion_choice(index, ev.text, ev.finish_reason, lps)]

    head = R.envelope(rid, "text_completion", model)
    return stream_choices(events, head, opening, render, len(starts), n, include_usage)
