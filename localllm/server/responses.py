"""Response bodies shaped exactly as OpenAI sends them (chat, completions, usage, logprobs)."""

from __future__ import annotations

import math
import time
import uuid
from typing import Any

from localllm import __version__
from localllm.core import TokenLogprob, Usage
from localllm.tokenizer import Tokenizer

FINGERPRINT = f"localllm-{__version__}"
MIN_LOGPROB = -9999.0  # what OpenAI reports for a token with zero probability (JSON has no -inf)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def envelope(rid: str, obj: str, model: str, created: int | None = None) -> dict[str, Any]:
    return {
        "id": rid,
        "object": obj,
        "created": created or int(time.time()),
        "model": model,
        "system_fingerprint": FINGERPRINT,
    }


def usage_body(usages: list[Usage | None], n: int) -> dict[str, Any]:
    """Prompt tokens count once per prompt (choice p*n), completion tokens for every choice."""
    per_prompt = [u for u in usages[::n] if u is not None]
    prompt = sum(u.prompt_tokens for u in per_prompt)
    cached = sum(u.cached_tokens for u in per_prompt)
    completion = sum(u.completion_tokens for u in usages if u is not None)
    drafted = sum(u.spec_drafted for u in usages if u is not None)
    accepted = sum(u.spec_accepted for u in usages if u is not None)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        # OpenAI's names for verified guesses (Predicted Outputs): n-gram drafts here
        "completion_tokens_details": {
            "accepted_prediction_tokens": accepted,
            "rejected_prediction_tokens": drafted - accepted,
        },
        "speculative": {"drafted_tokens": drafted, "accepted_tokens": accepted},  # extension
    }


def _lp(v: float) -> float:
    return MIN_LOGPROB if math.isnan(v) else max(float(v), MIN_LOGPROB)


def chat_logprobs(tok: Tokenizer, lps: list[TokenLogprob]) -> dict[str, Any]:
    def entry(tid: int, text: str, v: float) -> dict[str, Any]:
        return {"token": text, "logprob": _lp(v), "bytes": list(tok.token_bytes(tid))}

    content = []
    for lp in lps:
        e = entry(lp.token_id, lp.token, lp.logprob)
        e["top_logprobs"] = [entry(i, t, v) for i, t, v in lp.top]
        content.append(e)
    return {"content": content, "refusal": None}


def completion_logprobs(lps: list[TokenLogprob], offset: int = 0) -> dict[str, Any]:
    """Legacy completions shape; text_offset counts characters from the start of the text."""
    offsets = []
    for lp in lps:
        offsets.append(offset)
        offset += len(lp.token)
    return {
        "tokens": [lp.token for lp in lps],
        "token_logprobs": [_lp(lp.logprob) for lp in lps],
        "top_logprobs": [{t: _lp(v) for _, t, v in lp.top} for lp in lps],
        "text_offset": offsets,
    }


def chat_choice(
    index: int,
    text: str,
    finish: str | None,
    logprobs: dict[str, Any] | None,
    message: dict[str, Any] | None = None,  # the whole message (tool calls), else from text
) -> dict[str, Any]:
    return {
        "index": index,
        "message": message or {"role": "assistant", "content": text, "refusal": None},
        "logprobs": logprobs,
        "finish_reason": finish,
    }


def chat_chunk_choice(
    index: int,
    delta: dict[str, Any],
    finish: str | None = None,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}


def completion_choice(
    index: int, text: str, finish: str | None, logprobs: dict[str, Any] | None
) -> dict[str, Any]:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}
