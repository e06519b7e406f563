"""Ollama's answer shapes: one JSON object per line (NDJSON) while streaming, the final one
with `done: true`, `done_reason` and durations in nanoseconds; or that final object alone,
holding the whole text, with `stream: false`. Errors after the status line go in-band as
`{"error": "..."}` (Ollama's client raises on it)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from localllm.core import TokenEvent
from localllm.server.errors import APIError, error_body
from localllm.server.generation import ChoiceResult, check_event, collect, primed
from localllm.server.sse import EventStreamResponse

NDJSON = "application/x-ndjson"
# (the new text) -> the fields that carry it: {"response": t} or {"message": {...}}
Render = Callable[[str], dict[str, Any]]


def now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def ndjson(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def final_fields(r: ChoiceResult, started: float, prompt_len: int) -> dict[str, Any]:
    stats, usage = r.stats or {}, r.usage
    total = int((time.perf_counter() - started) * 1e9)
    prompt_ns = int((stats.get("ttft") or 0.0) * 1e9)
    return {
        "done": True,
        "done_reason": "length" if r.finish_reason == "length" else "stop",
        "total_duration": total,
        "load_duration": 0,
        "prompt_eval_count": usage.prompt_tokens if usage else prompt_len,
        "prompt_eval_duration": prompt_ns,
        "eval_count": usage.completion_tokens if usage else len(r.token_ids),
        "eval_duration": max(total - prompt_ns, 0),
    }


async def ollama_answer(
    request: Request,
    events: AsyncIterator[tuple[int, TokenEvent]],
    head: dict[str, Any],
    render: Render,
    stream: bool,
    prompt_ids: list[int],
    extra_final: Callable[[ChoiceResult], dict[str, Any]] | None = None,
) -> Response:
    started = time.perf_counter()
    if stream:
        body = _stream(await primed(events), head, render, prompt_ids, started, extra_final)
        return EventStreamResponse(body, media_type=NDJSON)
    (r,) = await collect(events, 1, request)
    out = {
        **head,
        "created_at": now_iso(),
        **render(r.text),
        **final_fields(r, started, len(prompt_ids)),
    }
    if extra_final is not None:
        out.update(extra_final(r))
    return Response(ndjson(out)[:-1], media_type="application/json")


async def _stream(
    events: AsyncIterator[tuple[int, TokenEvent]],
    head: dict[str, Any],
    render: Render,
    prompt_ids: list[int],
    started: float,
    extra_final: Callable[[ChoiceResult], dict[str, Any]] | None,
) -> AsyncIterator[bytes]:
    r = ChoiceResult()
    try:
        async for _, ev in events:
            check_event(ev)
            r.token_ids += ev.token_ids
            if ev.text:
                r.text += ev.text
                yield ndjson({**head, "created_at": now_iso(), **render(ev.text), "done": False})
            if ev.finished:
                r.finish_reason, r.usage, r.stats = ev.finish_reason, ev.usage, ev.stats
                last = {**head, "created_at": now_iso(), **render("")}
                last.update(final_fields(r, started, len(prompt_ids)))
                if extra_final is not None:
                    last.update(extra_final(r))
                yield ndjson(last)
    except Exception as e:  # noqa: BLE001 - the status line is sent: report in-band
        err = e if isinstance(e, APIError) else None
        yield ndjson({"error": err.message if err else error_body(e)["error"]["message"]})
