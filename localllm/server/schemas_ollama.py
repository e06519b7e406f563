"""Ollama's request bodies (`/api/chat`, `/api/generate`, `/api/show`) and `options`.

Options we implement are declared with Ollama's meaning; known ones we do not (mirostat,
typical_p, load-time options ...) pass only at their neutral values (`fields.UNSUPPORTED`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from localllm.server.schemas import (
    LLAMACPP_TEMPERATURE_MAX,
    MAX_STOP,
    UINT64,
    _Body,
    _Request,
    penalty_field,
)


class OllamaOptions(_Body):
    temperature: float | None = Field(None, ge=0.0, le=LLAMACPP_TEMPERATURE_MAX)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0)  # 0: disabled
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    num_predict: int | None = Field(None, ge=-2)  # -1: no limit, -2: fill the context
    num_ctx: int | None = Field(None, ge=1)  # at most the server's context (a per-request cap)
    stop: list[str] | None = Field(None, max_length=MAX_STOP)
    seed: int | None = Field(None, ge=-1, le=UINT64)  # -1: random
    repeat_penalty: float | None = penalty_field(None)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)


class OllamaMessage(_Body):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""


class _OllamaGeneration(_Request):
    model: str = Field(min_length=1)
    stream: bool = True
    options: OllamaOptions | None = None
    format: str | dict[str, Any] | None = None  # "json" or a JSON schema: the answer follows it


class OllamaChatRequest(_OllamaGeneration):
    messages: list[OllamaMessage] = Field(default_factory=list)


class OllamaGenerateRequest(_OllamaGeneration):
    prompt: str = ""
    suffix: str | None = None  # fill-in-the-middle
    system: str | None = None  # replaces the template's system message
    context: list[int] | None = Field(None, max_length=1_000_000)  # ids of an earlier answer
    raw: bool = False  # True: the prompt is used as given, without the chat template


class OllamaShowRequest(_Request):
    model: str | None = None
    name: str | None = None  # older clients
    verbose: bool = False
