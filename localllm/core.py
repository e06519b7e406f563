"""Request-level data: sampling parameters, sequences, token events. No torch here."""

from __future__ import annotations

import enum
import itertools
import time
from dataclasses import dataclass, field

from localllm.engine.speculative.policy import MAX_SPEC_TOKENS
from localllm.errors import RequestError
from localllm.sampling_defaults import API
from localllm.structured.spec import ConstraintSpec

# below this a temperature is greedy: logits / T would overflow float32 (T <= 1e-38 made
# every logit inf and every token <unk>), and it picks the argmax anyway (vLLM's epsilon)
GREEDY_TEMPERATURE = 1e-5


@dataclass
class SamplingParams:
    max_tokens: int = API.max_tokens
    temperature: float = API.temperature  # 0 = greedy
    top_p: float = API.top_p
    top_k: int = API.top_k  # 0 = disabled
    min_p: float = API.min_p
    repetition_penalty: float = API.repetition_penalty  # llama.cpp/CTRL style, prompt + output
    presence_penalty: float = 0.0  # OpenAI style, over output tokens
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = None  # None: off; N >= 0: chosen token + N most likely
    # speculative decoding of this request (llama.cpp's speculative.n_max / n_min): most
    # drafts verified per step (None: the engine's --spec-tokens; 0: off), and the fewest
    # worth verifying (a shorter proposal is not verified)
    spec_tokens: int | None = None
    spec_min_tokens: int = 0
    constraint: ConstraintSpec | None = None  # output follows this schema / grammar

    def __post_init__(self) -> None:
        checks = [
            (self.max_tokens >= 1, "max_tokens", "max_tokens must be >= 1"),
            (0.0 <= self.temperature <= 100.0, "temperature", "temperature must be in [0, 100]"),
            (0.0 < self.top_p <= 1.0, "top_p", "top_p must be in (0, 1]"),
            (self.top_k >= 0, "top_k", "top_k must be >= 0"),
            (0.0 <= self.min_p <= 1.0, "min_p", "min_p must be in [0, 1]"),
            (self.repetition_penalty > 0.0, "repetition_penalty", "repetition_penalty must be > 0"),
            (
                -2.0 <= self.presence_penalty <= 2.0,
                "presence_penalty",
                "presence_penalty must be in [-2, 2]",
            ),
            (
                -2.0 <= self.frequency_penalty <= 2.0,
                "frequency_penalty",
                "frequency_penalty must be in [-2, 2]",
            ),
            (
                self.logprobs is None or 0 <= self.logprobs <= 20,
                "logprobs",
                "top_logprobs must be in [0, 20]",
            ),
            (
                self.spec_tokens is None or 0 <= self.spec_tokens <= MAX_SPEC_TOKENS,
                "speculative.n_max",
                f"speculative.n_max must be in [0, {MAX_SPEC_TOKENS}]",
            ),
            (
                0 <= self.spec_min_tokens <= MAX_SPEC_TOKENS,
                "speculative.n_min",
                f"speculative.n_min must be in [0, {MAX_SPEC_TOKENS}]",
            ),
        ]
        for ok, param, msg in checks:
            if not ok:
                raise RequestError(msg, param=param)
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = [s for s in self.stop if s]

    @property
    def greedy(self) -> bool:
        """The one greedy predicate (the sampler, its fast paths and the engine derive theirs
        from it): the token is the argmax of the processed logits, nothing is drawn."""
        return self.temperature < GREEDY_TEMPERATURE or self.top_k == 1

    @property
    def raw_argmax(self) -> bool:
        """Greedy and nothing changes the logits (no penalty, no grammar mask): the token is the
        argmax of the raw ones."""
        return self.greedy and not self.needs_penalties and self.constraint is None

    @property
    def argmax_on_device(self) -> bool:
        """Greedy with no penalties and no logprobs: the token is the argmax of the logits
        after at most a grammar mask, which the engine applies on the device. The engine takes
        the id computed there (the decode CUDA graph's argmax, or `masked_argmax` for a
        constrained row) and the row never reaches the sampler."""
        return self.greedy and not self.needs_penalties and self.logprobs is None

    @property
    def needs_penalties(self) -> bool:
        return (
            self.repetition_penalty != 1.0
            or self.presence_penalty != 0.0
            or self.frequency_penalty != 0.0
        )


def check_context(prompt_tokens: int, completion_tokens: int, max_model_len: int) -> None:
    """The context limit, checked in one place: the prompt plus the tokens asked for must fit
    in max_model_len (the engine checks every request; the server asks early with one token)."""
    if prompt_tokens + completion_tokens > max_model_len:
        raise RequestError(
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {prompt_tokens + completion_tokens} tokens ({prompt_tokens} in the "
            f"prompt, {completion_tokens} for the completion). Please reduce the length of the "
            "messages or completion.",
            code="context_length_exceeded",
            param="messages",
        )


class SeqStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


_seq_counter = itertools.count()


class SequenceState:
    """One generation stream: prompt + output ids and how much of it is in the KV cache."""

    def __init__(self, request_id: str, prompt_ids: list[int], params: SamplingParams) -> None:
        self.seq_id = next(_seq_counter)
        self.request_id = request_id
        self.prompt_len = len(prompt_ids)
        self.token_ids: list[int] = list(prompt_ids)  # prompt + generated
        self.params = params
        self.status = SeqStatus.WAITING
        self.num_computed = 0  # tokens whose K/V are in the cache
        self.num_cached_prompt = 0  # prompt tokens served by the prefix cache (first admission)
        self.block_table: list[int] = []
        self.num_preemptions = 0
        self.finish_reason: str | None = None
        self.arrival_time = time.monotonic()
        self.scheduled_time: float | None = None
        self.first_token_time: float | None = None
        self.last_token_time: float | None = None
        self.finish_time: float | None = None
        self.draft_ids: list[int] = []  # speculative proposals for the next step
        self.spec_proposed = 0
        self.spec_accepted = 0
        self.spec_steps = 0  # verify steps (steps that fed drafts)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.prompt_len :]

    @property
    def num_output(self) -> int:
        return len(self.token_ids) - self.prompt_len

    @property
    def is_finished(self) -> bool:
        return self.status is SeqStatus.FINISHED

    @property
    def in_prefill(self) -> bool:
        """True while tokens other than the last sampled one still lack K/V."""
        return self.num_computed < self.num_tokens - 1

    def __repr__(self) -> str:
        return (
            f"SequenceState(id={self.seq_id}, req={self.request_id!r}, tokens={self.num_tokens}, "
            f"computed={self.num_computed}, status={self.status.value})"
        )


@dataclass
class TokenLogprob:
    token_id: int
    token: str
    logprob: float
    top: list[tuple[int, str, float]] = field(default_factory=list)  # (id, text, logprob)


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    spec_drafted: int = 0  # draft tokens verified (n-gram speculation)
    spec_accepted: int = 0  # of them, accepted

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class TokenEvent:
    """What a request's stream yields after each engine step that touched it."""

    request_id: str
    text: str = ""  # new text since the previous event (never half a UTF-8 character)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str | None = None  # "stop" | "length" | "abort" | "error"
    usage: Usage | None = None  # set on the final event
    error: str | None = None
    stats: dict | None = None  # per-request timings on the final event

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None
