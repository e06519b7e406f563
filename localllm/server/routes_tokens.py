"""POST /tokenize and /detokenize (llama.cpp and vLLM field names both work)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from localllm.engine.async_engine import AsyncEngine
from localllm.errors import RequestError
from localllm.server.context import Ctx, Engine
from localllm.server.offload import check_text_size, off_loop
from localllm.server.params import check_model
from localllm.server.prompts import chat_prompt_ids
from localllm.server.schemas import DetokenizeRequest, TokenizeRequest

router = APIRouter()


def _ids(req: TokenizeRequest, engine: AsyncEngine) -> list[int]:
    given = [x for x in (req.content, req.prompt, req.messages) if x is not None]
    if len(given) != 1:
        raise RequestError("give exactly one of content, prompt or messages", param="content")
    size = sum(len(m.content) if isinstance(m.content, str) else 0 for m in req.messages or [])
    size += len(req.content or req.prompt or "")
    check_text_size(engine.tokenizer, size, engine.max_model_len, "content")
    if req.messages is not None:
        msgs = [m.model_dump(exclude_none=True) for m in req.messages]
        return chat_prompt_ids(engine.tokenizer, engine.chat_template, msgs)
    add = req.add_special if req.add_special is not None else req.add_special_tokens
    text = req.content if req.content is not None else req.prompt
    return engine.tokenizer.encode(text or "", add_special=bool(add), parse_special=True)


@router.post("/tokenize")
async def tokenize(req: TokenizeRequest, ctx: Ctx, engine: Engine) -> dict[str, Any]:
    check_model(ctx.settings, req.model)
    ids = await off_loop(_ids, req, engine)
    tokens: list[Any] = ids
    if req.with_pieces:
        tokens = [{"id": i, "piece": engine.tokenizer.token_to_str(i)} for i in ids]
    return {"tokens": tokens, "count": len(ids), "max_model_len": engine.max_model_len}


@router.post("/detokenize")
async def detokenize(req: DetokenizeRequest, ctx: Ctx, engine: Engine) -> dict[str, Any]:
    check_model(ctx.settings, req.model)
    text = await off_loop(engine.tokenizer.decode, req.tokens)
    return {"content": text, "prompt": text}
