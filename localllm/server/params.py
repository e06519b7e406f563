"""Request fields -> engine SamplingParams, one per choice.

max_tokens: absent means "the rest of the context"; a value larger than what is left is
clamped to it (the choice then ends with finish_reason "length"), so clients written for
large hosted contexts still work. A prompt that alone fills the context is a 400
`context_length_exceeded`.
"""

from __future__ import annotations

from dataclasses import dataclass

from localllm.core import SamplingParams, check_context
from localllm.sampling_defaults import API
from localllm.server.errors import APIError
from localllm.server.schemas import SamplingFields
from localllm.server.settings import ServerSettings

UINT64_MOD = 2**64


@dataclass
class Job:
    """One engine request: which choice it fills and what it runs."""

    index: int  # choice index in the response
    prompt_ids: list[int]
    params: SamplingParams


def check_model(settings: ServerSettings, name: str | None) -> None:
    if not settings.serves(name):
        raise APIError(
            404,
            f"The model '{name}' does not exist; this server serves '{settings.model_name}'",
            code="model_not_found",
            param="model",
        )


def check_n(settings: ServerSettings, n: int) -> None:
    if n > settings.max_n:
        raise APIError(400, f"n must be at most {settings.max_n}", code="invalid_value", param="n")


def max_tokens_for(prompt_len: int, requested: int | None, max_model_len: int) -> int:
    check_context(prompt_len, 1, max_model_len)  # the engine's check, early: one token fits
    left = max_model_len - prompt_len
    return left if requested is None else min(requested, left)


def choice_seed(seed: int | None, i: int) -> int | None:
    """Choice i of a seeded request uses seed + i (as unsigned 64 bits)."""
    return None if seed is None else (seed + i) % UINT64_MOD


def sampling_params(
    req: SamplingFields, max_tokens: int, logprobs: int | None, seed: int | None
) -> SamplingParams:
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    top_k = req.top_k if req.top_k is not None and req.top_k > 0 else 0
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=API.temperature if req.temperature is None else req.temperature,
        top_p=API.top_p if req.top_p is None else req.top_p,
        top_k=top_k,
        min_p=req.min_p or 0.0,
        repetition_penalty=req.repetition_penalty or 1.0,
        presence_penalty=req.presence_penalty or 0.0,
        frequency_penalty=req.frequency_penalty or 0.0,
        seed=seed,
        stop=stop,
        ignore_eos=req.ignore_eos,
        logprobs=logprobs,
    )


def build_jobs(
    req: SamplingFields,
    prompts: list[list[int]],
    max_model_len: int,
    requested_max: int | None,
    logprobs: int | None,
) -> list[Job]:
    """n jobs per prompt; choice index = prompt_index * n + i."""
    jobs = []
    for p, ids in enumerate(prompts):
        max_tokens = max_tokens_for(len(ids), requested_max, max_model_len)
        for i in range(req.n):
            params = sampling_params(req, max_tokens, logprobs, choice_seed(req.seed, i))
            jobs.append(Job(p * req.n + i, ids, params))
    return jobs
