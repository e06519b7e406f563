"""POST /v1/chat/completions."""

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
from localllm.server.prompts import chat_prompt_ids
from localllm.server.schemas import ChatCompletionRequest
from localllm.server.sse import EventStreamResponse

router = APIRouter()


def _messages(req: ChatCompletionRequest) -> list[dict[str, Any]]:
    out = []
    for m in req.messages:
        msg = m.model_dump(exclude_none=True)
        if msg["role"] == "developer":  # OpenAI's newer name for the system role
            msg["role"] = "system"
        out.append(msg)
    return out


def _text_len(req: ChatCompletionRequest) -> int:
    parts = [m.content for m in req.messages if m.content is not None]
    return sum(len(c) if isinstance(c, str) else sum(len(p.text) for p in c) for c in parts)


def _logprobs_n(req: ChatCompletionRequest) -> int | None:
    if req.top_logprobs is not None and not req.logprobs:
        raise RequestError("top_logprobs needs logprobs=true", param="top_logprobs")
    return (req.top_logprobs or 0) if req.logprobs else None


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    req: ChatCompletionRequest, request: Request, ctx: Ctx, engine: Engine
) -> Response:
    check_model(ctx.settings, req.model)
    check_n(ctx.settings, req.n)
    messages = _messages(req)
    check_text_size(engine.tokenizer, _text_len(req), engine.max_model_len, "messages")
    ids = await off_loop(chat_prompt_ids, engine.tokenizer, engine.chat_template, messages)
    requested = req.max_completion_tokens or req.max_tokens
    jobs = build_jobs(req, [ids], engine.max_model_len, requested, _logprobs_n(req))
    rid = R.new_id("chatcmpl")
    events = merged_events(engine, jobs, False, ctx.metrics, "chat", rid)
    model = ctx.settings.model_name
    if req.stream:
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        body = _stream(await primed(events), engine, rid, model, req.n, include_usage)
        return EventStreamResponse(body)
    results = await collect(events, req.n, request)
    out = R.envelope(rid, "chat.completion", model)
    out["choices"] = [
        R.chat_choice(
            i,
            r.text,
            r.finish_reason,
            R.chat_logprobs(engine.tokenizer, r.logprobs) if req.logprobs else None,
        )
        for i, r in enumerate(results)
    ]
    out["usage"] = R.usage_body([r.usage for r in results], req.n)
    return JSONResponse(out)


def _stream(
    events: AsyncIterator[tuple[int, TokenEvent]],
    engine: AsyncEngine,
    rid: str,
    model: str,
    n: int,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    role = {"role": "assistant", "content": "", "refusal": None}
    opening = [R.chat_chunk_choice(i, role) for i in range(n)]  # role first, as OpenAI does

    def render(index: int, ev: TokenEvent) -> list[dict[str, Any]]:
        out = []
        if ev.text or ev.logprobs:
            lps = R.chat_logprobs(engine.tokenizer, ev.logprobs) if ev.logprobs else None
            out.append(R.chat_chunk_choice(index, {"content": ev.text}, None, lps))
        if ev.finished:
            out.append(R.chat_chunk_choice(index, {}, ev.finish_reason))
        return out

    head = R.envelope(rid, "chat.completion.chunk", model)
    return stream_choices(events, head, opening, render, n, n, include_usage)
