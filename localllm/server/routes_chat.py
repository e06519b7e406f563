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
from localllm.server.schemas_structured import StructuredChatRequest
from localllm.server.sse import EventStreamResponse
from localllm.server.structured import (
    ChoiceTools,
    ToolPlan,
    chat_constraint,
    chat_prompt_text,
    finish_reason,
    output_constraint,
    tool_plan,
    uses_tools,
)

router = APIRouter()


def _messages(req: StructuredChatRequest) -> list[dict[str, Any]]:
    out = []
    for m in req.messages:
        msg = m.model_dump(exclude_none=True)
        if msg["role"] == "developer":  # OpenAI's newer name for the system role
            msg["role"] = "system"
        out.append(msg)
    return out


def _text_len(req: StructuredChatRequest) -> int:
    """Characters of text the prompt is made of (messages, earlier calls, tool schemas)."""
    parts = [m.content for m in req.messages if m.content is not None]
    size = sum(len(c) if isinstance(c, str) else sum(len(p.text) for p in c) for c in parts)
    calls = [c for m in req.messages for c in m.tool_calls or []]
    size += sum(len(c.function.name) + len(c.function.arguments) for c in calls)
    return size + sum(len(t.model_dump_json()) for t in req.tools or [])


def _logprobs_n(req: StructuredChatRequest) -> int | None:
    if req.top_logprobs is not None and not req.logprobs:
        raise RequestError("top_logprobs needs logprobs=true", param="top_logprobs")
    return (req.top_logprobs or 0) if req.logprobs else None


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    req: StructuredChatRequest, request: Request, ctx: Ctx, engine: Engine
) -> Response:
    check_model(ctx.settings, req.model)
    check_n(ctx.settings, req.n)
    messages = _messages(req)
    check_text_size(engine.tokenizer, _text_len(req), engine.max_model_len, "messages")
    plan = tool_plan(req, engine.chat_template.source)
    constraint = await chat_constraint(engine, plan, output_constraint(req))
    ids = await off_loop(_prompt_ids, engine, messages, plan)
    requested = req.max_completion_tokens or req.max_tokens
    jobs = build_jobs(req, [ids], engine.max_model_len, requested, _logprobs_n(req), constraint)
    rid = R.new_id("chatcmpl")
    events = merged_events(engine, jobs, False, ctx.metrics, "chat", rid)
    model = ctx.settings.model_name
    if req.stream:
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        body = _stream(await primed(events), engine, rid, model, req.n, include_usage, plan)
        return EventStreamResponse(body)
    results = await collect(events, req.n, request)
    out = R.envelope(rid, "chat.completion", model)
    out["choices"] = []
    for i, r in enumerate(results):
        message, reason = None, r.finish_reason
        if plan is not None:
            tools = ChoiceTools(plan)
            tools.delta(r.text)
            message = tools.finish()[1]
            reason = finish_reason(reason, tools.called)
        lps = R.chat_logprobs(engine.tokenizer, r.logprobs) if req.logprobs else None
        out["choices"].append(R.chat_choice(i, r.text, reason, lps, message))
    out["usage"] = R.usage_body([r.usage for r in results], req.n)
    return JSONResponse(out)


def _prompt_ids(
    engine: AsyncEngine, messages: list[dict[str, Any]], plan: ToolPlan | None
) -> list[int]:
    template = engine.chat_template
    if plan is None and not uses_tools(messages):
        return chat_prompt_ids(engine.tokenizer, template, messages)
    text = chat_prompt_text(template, messages, plan)
    return engine.tokenizer.encode(text, add_special=not template.renders_bos, parse_special=True)


def _stream(
    events: AsyncIterator[tuple[int, TokenEvent]],
    engine: AsyncEngine,
    rid: str,
    model: str,
    n: int,
    include_usage: bool,
    plan: ToolPlan | None,
) -> AsyncIterator[bytes]:
    role = {"role": "assistant", "content": "", "refusal": None}
    opening = [R.chat_chunk_choice(i, role) for i in range(n)]  # role first, as OpenAI does
    tools = [ChoiceTools(plan) for _ in range(n)] if plan is not None else None

    def render(index: int, ev: TokenEvent) -> list[dict[str, Any]]:
        out = []
        lps = R.chat_logprobs(engine.tokenizer, ev.logprobs) if ev.logprobs else None
        if tools is None:
            if ev.text or ev.logprobs:
                out.append(R.chat_chunk_choice(index, {"content": ev.text}, None, lps))
        else:
            deltas = tools[index].delta(ev.text)
            if ev.finished:
                deltas += tools[index].finish()[0]
            out += [R.chat_chunk_choice(index, d, None, lps) for d in deltas]
        if ev.finished:
            called = tools is not None and tools[index].called
            out.append(R.chat_chunk_choice(index, {}, finish_reason(ev.finish_reason, called)))
        return out

    head = R.envelope(rid, "chat.completion.chunk", model)
    return stream_choices(events, head, opening, render, n, n, include_usage)
