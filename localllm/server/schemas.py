"""Request bodies (pydantic). Unknown fields are ignored, types are strict (no "5" for 5).

Responses are plain dicts built in `responses.py`, shaped as OpenAI sends them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

UINT64 = 2**64 - 1
INT64_MIN = -(2**63)


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)


class StreamOptions(_Body):
    include_usage: bool = False


class SamplingFields(_Body):
    """Fields every generation endpoint shares (OpenAI names plus vLLM/llama.cpp extras)."""

    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=-1)  # 0 or -1: disabled
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = Field(None, gt=0.0, le=10.0)
    seed: int | None = Field(None, ge=INT64_MIN, le=UINT64)
    stop: str | list[str] | None = Field(None, max_length=16)
    n: int = Field(1, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    ignore_eos: bool = False  # vLLM extension: generate past EOS (benchmarks)


class TextPart(_Body):
    type: Literal["text"]
    text: str


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)


class CompletionRequest(SamplingFields):
    # a string, a list of strings (one choice set each), a token list, or a list of token lists
    prompt: str | list[str] | list[int] | list[list[int]] = ""
    suffix: str | None = None  # fill-in-the-middle with the model's FIM tokens
    echo: bool = False
    logprobs: int | None = Field(None, ge=0, le=20)


class ExtraChunk(_Body):
    filename: str = "tmp"
    text: str = ""


class InfillRequest(_Body):
    """llama.cpp's `/infill` body (as llama.vim / llama.vscode send it); defaults as llama.cpp."""

    model: str | None = None
    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: list[ExtraChunk] = Field(default_factory=list)
    prompt: str = ""  # text typed at the cursor, appended to input_prefix
    n_predict: int = Field(-1, ge=-1)  # -1: until the context is full
    max_tokens: int | None = Field(None, ge=1)
    temperature: float = Field(0.8, ge=0.0, le=100.0)
    top_k: int = Field(40, ge=-1)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    min_p: float = Field(0.05, ge=0.0, le=1.0)
    repeat_penalty: float = Field(1.0, gt=0.0, le=10.0)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    seed: int = Field(-1, ge=-1, le=UINT64)  # -1: random
    stop: list[str] = Field(default_factory=list, max_length=16)
    stream: bool = False


class TokenizeRequest(_Body):
    model: str | None = None
    content: str | None = None  # llama.cpp name
    prompt: str | None = None  # vLLM name
    messages: list[ChatMessage] | None = None  # tokenize a rendered conversation instead
    add_special: bool | None = None
    add_special_tokens: bool | None = None  # vLLM name
    with_pieces: bool = False


class DetokenizeRequest(_Body):
    model: str | None = None
    tokens: list[int] = Field(max_length=1_000_000)
