"""Request bodies (pydantic), strictly typed (no "5" for 5). Fields a model does not declare
go through `fields.check_extra`: neutral values of known fields pass, anything else is a 400
naming the field. Every string of a top-level body is checked for lone surrogates first.

Value ranges live here, once (docs/server.md lists them). Responses are plain dicts built in
`responses.py`, shaped as OpenAI sends them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from localllm.engine.speculative.policy import MAX_SPEC_TOKENS
from localllm.server.fields import FieldError, check_extra, find_bad_text

UINT64 = 2**64 - 1
INT64_MIN = -(2**63)
TEMPERATURE_MAX = 2.0  # OpenAI's range; llama.cpp's routes allow up to LLAMACPP_TEMPERATURE_MAX
LLAMACPP_TEMPERATURE_MAX = 100.0
REPETITION_PENALTY_RANGE = (0.01, 10.0)  # a smaller penalty overflows float32 logits
MAX_STOP = 16


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _no_ignored_fields(self) -> _Body:
        if self.model_extra:
            check_extra(self.model_extra, {**self.__dict__, **self.model_extra})
        return self


class _Request(_Body):
    """A whole request body: its strings are checked for lone surrogates before parsing."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        bad = find_bad_text(data)
        if bad is not None:
            raise FieldError(
                f"Invalid '{bad}': the text contains a lone UTF-16 surrogate (such as "
                "\\ud800), which is not valid Unicode",
                code="invalid_unicode",
                param=bad,
            )
        return data


def penalty_field(default: float | None) -> Any:
    lo, hi = REPETITION_PENALTY_RANGE
    return Field(default, ge=lo, le=hi)


class SpeculativeFields(_Body):
    """Per-request n-gram speculation, as llama.cpp's server names it: n_max = most draft
    tokens verified per step (0: off for this request), n_min = shorter drafts are not
    verified. Absent: the server's --spec-tokens."""

    n_max: int | None = Field(None, ge=0, le=MAX_SPEC_TOKENS)
    n_min: int | None = Field(None, ge=0, le=MAX_SPEC_TOKENS)


class SpecRequest(_Request):
    """A generation body with speculation overrides: `"speculative": {"n_max": 8}` (our
    OpenAI-body extension) or llama.cpp's flat `"speculative.n_max": 8`; the nested object
    wins where both are given."""

    speculative: SpeculativeFields | None = None
    speculative_n_max: int | None = Field(None, alias="speculative.n_max", ge=0, le=MAX_SPEC_TOKENS)
    speculative_n_min: int | None = Field(None, alias="speculative.n_min", ge=0, le=MAX_SPEC_TOKENS)

    def spec_limits(self) -> tuple[int | None, int]:
        """(SamplingParams.spec_tokens, .spec_min_tokens) these overrides ask for."""
        nested = self.speculative
        n_max = nested.n_max if nested and nested.n_max is not None else self.speculative_n_max
        n_min = nested.n_min if nested and nested.n_min is not None else self.speculative_n_min
        return n_max, n_min or 0


class StreamOptions(_Body):
    include_usage: bool = False


class SamplingFields(SpecRequest):
    """Fields every OpenAI generation endpoint shares (plus vLLM/llama.cpp extras)."""

    model: str | None = None
    max_tokens: int | None = Field(None, ge=-1)  # -1 (llama.cpp): the rest of the context
    temperature: float | None = Field(None, ge=0.0, le=TEMPERATURE_MAX)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=-1)  # 0 or -1: disabled
    min_p: float | None = Field(None, ge=0.0, le=1.0)
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = penalty_field(None)
    repeat_penalty: float | None = penalty_field(None)  # llama.cpp's name for the same
    samplers: list[str] | str | None = None  # llama.cpp: which samplers run (see params.py)
    seed: int | None = Field(None, ge=INT64_MIN, le=UINT64)
    stop: str | list[str] | None = Field(None, max_length=MAX_STOP)
    n: int = Field(1, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False  # vLLM extension: generate past EOS (benchmarks)

    @field_validator("max_tokens")
    @classmethod
    def _max_tokens(cls, v: int | None) -> int | None:
        if v == 0:
            raise ValueError("must be >= 1 (or -1 for the rest of the context)")
        return None if v == -1 else v

    @property
    def penalty(self) -> float | None:
        return (
            self.repetition_penalty if self.repetition_penalty is not None else self.repeat_penalty
        )


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


class TokenizeRequest(_Request):
    model: str | None = None
    content: str | None = None  # llama.cpp name
    prompt: str | None = None  # vLLM name
    messages: list[ChatMessage] | None = None  # tokenize a rendered conversation instead
    add_special: bool | None = None
    add_special_tokens: bool | None = None  # vLLM name
    with_pieces: bool = False


class DetokenizeRequest(_Request):
    model: str | None = None
    tokens: list[int] = Field(max_length=1_000_000)
