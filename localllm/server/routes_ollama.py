"""Ollama's API over the same engine: /api/version, /api/tags, /api/ps, /api/show,
/api/chat and /api/generate (NDJSON streams by default, `stream: false` for one object).

`options` map onto the sampler (docs/server.md lists them); Ollama's defaults apply where
a client sends none, except repeat_penalty (Ollama: 1.1 over the last 64 tokens; ours spans
the context, so it is off unless asked). Errors are `{"error": "..."}` as Ollama sends them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from localllm.core import SamplingParams
from localllm.engine.async_engine import AsyncEngine
from localllm.errors import RequestError
from localllm.server.context import Ctx, Engine, ServerContext
from localllm.server.generation import ChoiceResult, merged_events
from localllm.server.offload import check_text_size, off_loop
from localllm.server.ollama_answer import now_iso, ollama_answer
from localllm.server.ollama_model import (
    OLLAMA_API_VERSION,
    ModelFacts,
    details,
    list_entry,
    model_facts,
    tag_name,
)
from localllm.server.params import Job, check_model, make_params, max_tokens_for
from localllm.server.prompts import chat_prompt_ids, fim_prompt_ids
from localllm.server.responses import new_id
from localllm.server.schemas_ollama import (
    OllamaChatRequest,
    OllamaGenerateRequest,
    OllamaOptions,
    OllamaShowRequest,
)
from localllm.server.structured import compiled, ollama_constraint

router = APIRouter()
DEFAULTS = {"temperature": 0.8, "top_p": 0.9, "top_k": 40, "min_p": 0.0}


def ollama_params(o: OllamaOptions | None, prompt_len: int, max_model_len: int) -> SamplingParams:
    o = o or OllamaOptions.model_validate({})
    limit = max_model_len
    if o.num_ctx is not None:
        if o.num_ctx > max_model_len:
            raise RequestError(
                f"num_ctx {o.num_ctx} is larger than this server's context ({max_model_len} "
                "tokens, set with --max-model-len)",
                param="options.num_ctx",
            )
        limit = o.num_ctx
    if o.num_predict == 0:
        raise RequestError("num_predict must not be 0", param="options.num_predict")
    wanted = o.num_predict if o.num_predict is not None and o.num_predict > 0 else None
    picked = {k: v for k, v in o.model_dump(exclude_none=True).items() if k in DEFAULTS}
    values = {
        **DEFAULTS,
        **picked,
        "max_tokens": max_tokens_for(prompt_len, wanted, limit),
        "repetition_penalty": o.repeat_penalty or 1.0,
        "presence_penalty": o.presence_penalty or 0.0,
        "frequency_penalty": o.frequency_penalty or 0.0,
        "seed": None if o.seed in (None, -1) else o.seed,
        "stop": list(o.stop or []),
    }
    return make_params(values, None)


def _events(
    ctx: ServerContext,
    engine: AsyncEngine,
    ids: list[int],
    params: SamplingParams,
    endpoint: str,
    continuation: bool,
):  # noqa: ANN202
    job = Job(0, ids, params)
    return merged_events(engine, [job], continuation, ctx.metrics, endpoint, new_id(endpoint))


def _loaded(head: dict[str, Any], fields: dict[str, Any]) -> Response:
    """Ollama's answer to an empty request: the model is loaded, nothing generated."""
    from localllm.server.ollama_answer import ndjson

    body = {**head, "created_at": now_iso(), **fields, "done": True, "done_reason": "load"}
    return Response(ndjson(body)[:-1], media_type="application/json")


@router.post("/api/chat", response_model=None)
async def chat(req: OllamaChatRequest, request: Request, ctx: Ctx, engine: Engine) -> Response:
    check_model(ctx.settings, req.model)
    head = {"model": req.model}
    if not req.messages:
        return _loaded(head, {"message": {"role": "assistant", "content": ""}})
    msgs = [m.model_dump() for m in req.messages]
    check_text_size(
        engine.tokenizer, sum(len(m["content"]) for m in msgs), engine.max_model_len, "messages"
    )
    ids = await off_loop(chat_prompt_ids, engine.tokenizer, engine.chat_template, msgs)
    params = ollama_params(req.options, len(ids), engine.max_model_len)
    params.constraint = await compiled(engine, ollama_constraint(req.format))
    events = _events(ctx, engine, ids, params, "ollama_chat", False)

    def render(text: str) -> dict[str, Any]:
        return {"message": {"role": "assistant", "content": text}}

    return await ollama_answer(request, events, head, render, req.stream, ids)


def generate_ids(engine: AsyncEngine, req: OllamaGenerateRequest) -> list[int]:
    tok = engine.tokenizer
    size = len(req.prompt) + len(req.suffix or "") + len(req.system or "")
    check_text_size(tok, size, engine.max_model_len, "prompt")
    if req.suffix is not None:
        return fim_prompt_ids(tok, req.prompt, req.suffix, param="suffix")
    if req.raw:
        ids = tok.encode(req.prompt, add_special=not req.context, parse_special=True)
    else:
        msgs = ([{"role": "system", "content": req.system}] if req.system else []) + [
            {"role": "user", "content": req.prompt}
        ]
        ids = chat_prompt_ids(tok, engine.chat_template, msgs)
        if req.context and ids and ids[0] == tok.bos_id:
            ids = ids[1:]
    return list(req.context or []) + ids


@router.post("/api/generate", response_model=None)
async def generate(
    req: OllamaGenerateRequest, request: Request, ctx: Ctx, engine: Engine
) -> Response:
    check_model(ctx.settings, req.model)
    head = {"model": req.model}
    if not req.prompt and req.suffix is None and not req.context:
        return _loaded(head, {"response": ""})
    ids = await off_loop(generate_ids, engine, req)
    params = ollama_params(req.options, len(ids), engine.max_model_len)
    params.constraint = await compiled(engine, ollama_constraint(req.format))
    events = _events(ctx, engine, ids, params, "ollama_generate", True)

    def render(text: str) -> dict[str, Any]:
        return {"response": text}

    def context(r: ChoiceResult) -> dict[str, Any]:
        return {} if req.raw else {"context": ids + r.token_ids}

    return await ollama_answer(request, events, head, render, req.stream, ids, context)


def _facts(ctx: ServerContext, engine: AsyncEngine) -> ModelFacts:
    return model_facts(ctx.settings.model_path or engine.engine.cfg.model)


@router.get("/api/version")
async def version() -> dict[str, Any]:
    return {"version": OLLAMA_API_VERSION}


@router.get("/api/tags")
async def tags(ctx: Ctx, engine: Engine) -> dict[str, Any]:
    return {"models": [list_entry(ctx.settings.model_name, _facts(ctx, engine))]}


@router.get("/api/ps")
async def ps(ctx: Ctx, engine: Engine) -> dict[str, Any]:
    facts = _facts(ctx, engine)
    entry = list_entry(ctx.settings.model_name, facts)
    del entry["modified_at"]
    far = datetime.now(UTC) + timedelta(days=365 * 100)  # loaded until the server stops
    entry["expires_at"] = far.isoformat().replace("+00:00", "Z")
    entry["size_vram"] = facts.size if str(engine.engine.runner.device).startswith("cuda") else 0
    entry["context_length"] = engine.max_model_len
    return {"models": [entry]}


@router.post("/api/show")
async def show(req: OllamaShowRequest, ctx: Ctx, engine: Engine) -> dict[str, Any]:
    name = req.model or req.name
    if not name:
        raise RequestError("model is required", param="model")
    check_model(ctx.settings, name)
    facts = _facts(ctx, engine)
    info = {**facts.metadata, "general.parameter_count": facts.n_params}
    info[f"{facts.arch}.context_length"] = engine.max_model_len
    caps = ["completion"] + (["insert"] if engine.tokenizer.fim_ids is not None else [])
    return {
        "license": str(facts.metadata.get("general.license", "")),
        "modelfile": f"# served by localllm\nFROM {ctx.settings.model_path}\n",
        "parameters": "",
        "template": engine.chat_template.source,
        "details": details(facts),
        "model_info": info,
        "capabilities": caps,
        "modified_at": facts.modified_at,
        "name": tag_name(ctx.settings.model_name),
    }
