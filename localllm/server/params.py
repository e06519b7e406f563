"""Request fields -> engine SamplingParams, one per choice.

max_tokens: absent means "the rest of the context"; a value larger than what is left is
clamped to it (the choice then ends with finish_reason "length"), so clients written for
large hosted contexts still work. A prompt that alone fills the context is a 400
`context_length_exceeded`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from localllm.core import SamplingParams, check_context
from localllm.errors import RequestError
from localllm.sampling_defaults import API
from localllm.server.errors import APIError
from localllm.server.schemas import SamplingFields
from localllm.server.settings import ServerSettings
from localllm.structured.spec import ConstraintSpec

UINT64_MOD = 2**64

# llama.cpp's `samplers` (names, or one letter each in a string) -> the SamplingParams fields
# that step owns. A step left out of the list is switched off (its fields get OFF values).
# Steps we do not have (dry, typ_p, xtc, top_n_sigma) own nothing: their parameters are only
# accepted at their "off" values (fields.py), so listing them changes nothing. `infill`
# (llama.cpp's FIM-specific candidate merging) is accepted and not implemented: the candidates
# are drawn from the top-k/top-p distribution as they are (docs/server.md).
SAMPLER_FIELDS: dict[str, tuple[str, ...]] = {
    "penalties": ("repetition_penalty", "presence_penalty", "frequency_penalty"),
    "top_k": ("top_k",),
    "top_p": ("top_p",),
    "min_p": ("min_p",),
    "temperature": ("temperature",),
    "dry": (),
    "typ_p": (),
    "typical_p": (),
    "xtc": (),
    "top_n_sigma": (),
    "infill": (),
}
SAMPLER_LETTERS = {
    "e": "penalties",
    "d": "dry",
    "k": "top_k",
    "y": "typ_p",
    "p": "top_p",
    "m": "min_p",
    "x": "xtc",
    "t": "temperature",
    "s": "top_n_sigma",
    "i": "infill",
}
OFF = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "temperature": 1.0,
}


def apply_samplers(values: dict[str, Any], samplers: Sequence[str] | str | None) -> dict[str, Any]:
    """`values` (SamplingParams fields) with the steps `samplers` leaves out switched off."""
    if samplers is None:
        return values
    names = [SAMPLER_LETTERS.get(c, c) for c in samplers] if isinstance(samplers, str) else samplers
    unknown = [n for n in names if n not in SAMPLER_FIELDS]
    if unknown:
        raise RequestError(
            f"unknown sampler {ascii(unknown[0])}; known: {', '.join(SAMPLER_FIELDS)} "
            f"(or the letters {''.join(SAMPLER_LETTERS)})",
            param="samplers",
        )
    on = {f for n in names for f in SAMPLER_FIELDS[n]}
    return {**values, **{k: v for k, v in OFF.items() if k not in on}}


def make_params(values: dict[str, Any], samplers: Sequence[str] | str | None) -> SamplingParams:
    return SamplingParams(**apply_samplers(values, samplers))


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
            f"The model {ascii(name)} does not exist; this server serves "
            f"{ascii(settings.model_name)} (started with --strict-model-name)",
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
    req: SamplingFields,
    max_tokens: int,
    logprobs: int | None,
    seed: int | None,
    constraint: ConstraintSpec | None = None,
) -> SamplingParams:
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    top_k = req.top_k if req.top_k is not None and req.top_k > 0 else 0
    values = dict(
        max_tokens=max_tokens,
        temperature=API.temperature if req.temperature is None else req.temperature,
        top_p=API.top_p if req.top_p is None else req.top_p,
        top_k=top_k,
        min_p=req.min_p or 0.0,
        repetition_penalty=req.penalty or 1.0,
        presence_penalty=req.presence_penalty or 0.0,
        frequency_penalty=req.frequency_penalty or 0.0,
        seed=seed,
        stop=stop,
        ignore_eos=req.ignore_eos,
        logprobs=logprobs,
        constraint=constraint,
    )
    values["spec_tokens"], values["spec_min_tokens"] = req.spec_limits()
    return make_params(values, req.samplers)


def build_jobs(
    req: SamplingFields,
    prompts: list[list[int]],
    max_model_len: int,
    requested_max: int | None,
    logprobs: int | None,
    constraint: ConstraintSpec | None = None,
) -> list[Job]:
    """n jobs per prompt; choice index = prompt_index * n + i; each choice follows
    `constraint` on its own."""
    jobs = []
    for p, ids in enumerate(prompts):
        max_tokens = max_tokens_for(len(ids), requested_max, max_model_len)
        for i in range(req.n):
            seed = choice_seed(req.seed, i)
            params = sampling_params(req, max_tokens, logprobs, seed, constraint)
            jobs.append(Job(p * req.n + i, ids, params))
    return jobs
