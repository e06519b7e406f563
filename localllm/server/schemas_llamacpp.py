"""llama.cpp's native bodies: `/infill` (as llama.vim / llama.vscode send it) and `/completion`.

Defaults are llama-server's. Fields it has that we do not implement go through
`fields.UNSUPPORTED` like every other body (neutral values pass, others get a 400).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from localllm.server.schemas import (
    LLAMACPP_TEMPERATURE_MAX,
    MAX_STOP,
    UINT64,
    SpecRequest,
    _Body,
    penalty_field,
)


class LlamaCppFields(SpecRequest):
    """Sampling and stopping fields `/infill` and `/completion` share."""

    model: str | None = None
    n_predict: int = Field(-1, ge=-1)  # -1: until the context is full; 0: only cache the prompt
    max_tokens: int | None = Field(None, ge=1)  # OpenAI name, wins over n_predict
    temperature: float = Field(0.8, ge=0.0, le=LLAMACPP_TEMPERATURE_MAX)
    top_k: int = Field(40, ge=-1)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    min_p: float = Field(0.05, ge=0.0, le=1.0)
    repeat_penalty: float = penalty_field(1.0)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    seed: int = Field(-1, ge=-1, le=UINT64)  # -1 (or 2^32-1, llama.cpp's default): random
    samplers: list[str] | str | None = None
    stop: list[str] = Field(default_factory=list, max_length=MAX_STOP)
    ignore_eos: bool = False
    stream: bool = False
    n_indent: int = Field(0, ge=0)  # stop at a line indented less than this (FIM)
    t_max_prompt_ms: int = Field(-1, ge=-1)  # <= 0: no limit
    t_max_predict_ms: int = Field(-1, ge=-1)  # <= 0: no limit
    response_fields: list[str] | None = Field(None, max_length=64)
    grammar: str | None = None  # GBNF the answer must match
    json_schema: dict[str, Any] | None = None  # a JSON schema the answer must follow


class ExtraChunk(_Body):
    filename: str = "tmp"
    text: str = ""


class InfillRequest(LlamaCppFields):
    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: list[ExtraChunk] = Field(default_factory=list, max_length=1024)
    prompt: str = ""  # text typed at the cursor, appended to input_prefix


class CompletionRequest(LlamaCppFields):
    # a string, or a list mixing token ids and strings (concatenated, as llama.cpp does)
    prompt: str | list[int | str]
    n_probs: int = Field(0, ge=0, le=20)  # top-N probabilities per generated token
