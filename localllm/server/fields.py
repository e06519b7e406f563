"""Request fields the server does not implement: one table, so a feature lifts its own row.

Every request body is parsed with `extra="allow"`; each field a body model does not declare is
looked up here. A known field whose value asks for nothing (`response_format: {"type":
"text"}`, `tools: []`, llama.cpp's `typical_p: 1`, `xtc_probability: 0` ...) is accepted, so
clients that send their defaults (llama.vscode, Open WebUI, the Ollama client) work; any other
value gets a 400 naming the field. A field that is not in the table at all gets a 400 too,
as OpenAI answers an unrecognized argument. Nothing is silently ignored.

Also here: the lone-surrogate check. JSON may encode a lone UTF-16 surrogate (`"\\ud800"`),
which Python decodes into a str that cannot be encoded to UTF-8; every string in a body is
checked once, before anything tokenizes or echoes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class FieldError(ValueError):
    """Raised inside a body model's validator; the 400 names `param` under the model's path."""

    def __init__(self, message: str, code: str, param: str) -> None:
        super().__init__(message)
        self.message, self.code, self.param = message, code, param


Neutral = Callable[[Any, Mapping[str, Any]], bool]  # (value, the body's other fields) -> ok


def _is(*values: Any) -> Neutral:
    return lambda v, body: v is None or any(v == x and type(v) is type(x) for x in values)


def _empty(v: Any, body: Mapping[str, Any]) -> bool:
    return v is None or v == [] or v == {} or v == ""


def _any(v: Any, body: Mapping[str, Any]) -> bool:
    return True


def _with(other: str, neutral: Neutral) -> Neutral:
    """Accepted whatever its value while `other` (the switch it tunes) is neutral."""
    return lambda v, body: neutral(body.get(other), body)


def _response_format(v: Any, body: Mapping[str, Any]) -> bool:
    return v is None or v == {"type": "text"}


def _repeat_last_n(v: Any, body: Mapping[str, Any]) -> bool:
    # our repetition penalty always spans the whole context (llama.cpp's -1)
    penalty = body.get("repeat_penalty", body.get("repetition_penalty"))
    return v is None or v == -1 or penalty is None or penalty == 1


# field -> when its value asks for nothing; "why" strings go into the 400's message
UNSUPPORTED: dict[str, tuple[Neutral, str]] = {
    # structured output and tool calls: implemented where a body declares them; elsewhere
    # these rows say which routes have them
    "response_format": (
        _response_format,
        "structured output is on /v1/chat/completions and /v1/completions",
    ),
    "format": (
        _empty,
        "Ollama's format is on /api/chat and /api/generate (OpenAI routes: response_format)",
    ),
    "grammar": (
        _empty,
        "grammars work on /v1/chat/completions, /v1/completions, /completion and /infill",
    ),
    "json_schema": (
        _empty,
        "json_schema works on /v1/chat/completions, /v1/completions, /completion and /infill",
    ),
    "tools": (_empty, "tool calls are on /v1/chat/completions"),
    "tool_choice": (_is("none", "auto"), "tool calls are on /v1/chat/completions"),
    "functions": (_empty, "the deprecated functions API is not supported: use tools"),
    "function_call": (
        _is("none", "auto"),
        "the deprecated functions API is not supported: use tool_choice",
    ),
    "parallel_tool_calls": (_with("tools", _empty), "tool calls are on /v1/chat/completions"),
    "tool_calls": (_empty, "tool calls in messages are on /v1/chat/completions"),
    "images": (_empty, "images are not supported (text-only models)"),
    "logit_bias": (_empty, "logit_bias is not supported"),
    "lora": (_empty, "LoRA adapters are not supported"),
    # llama.cpp samplers we do not have: accepted at their "off" values
    "typical_p": (_is(1, 1.0), "typical sampling is not supported (use 1)"),
    "tfs_z": (_is(1, 1.0), "tail-free sampling is not supported (use 1)"),
    "mirostat": (_is(0), "mirostat is not supported (use 0)"),
    "mirostat_tau": (_with("mirostat", _is(0)), "mirostat is not supported"),
    "mirostat_eta": (_with("mirostat", _is(0)), "mirostat is not supported"),
    "dynatemp_range": (_is(0, 0.0), "dynamic temperature is not supported (use 0)"),
    "dynatemp_exponent": (_with("dynatemp_range", _is(0, 0.0)), "dynamic temperature"),
    "xtc_probability": (_is(0, 0.0), "XTC sampling is not supported (use 0)"),
    "xtc_threshold": (_with("xtc_probability", _is(0, 0.0)), "XTC sampling"),
    "dry_multiplier": (_is(0, 0.0), "DRY sampling is not supported (use 0)"),
    "dry_base": (_with("dry_multiplier", _is(0, 0.0)), "DRY sampling"),
    "dry_allowed_length": (_with("dry_multiplier", _is(0, 0.0)), "DRY sampling"),
    "dry_penalty_last_n": (_with("dry_multiplier", _is(0, 0.0)), "DRY sampling"),
    "dry_sequence_breakers": (_with("dry_multiplier", _is(0, 0.0)), "DRY sampling"),
    "top_n_sigma": (_is(-1, -1.0), "top-n-sigma sampling is not supported (use -1)"),
    "repeat_last_n": (_repeat_last_n, "the repetition penalty always covers the whole context"),
    "penalize_nl": (_is(False), "penalize_nl is not supported"),
    "timings_per_token": (_is(False), "per-token timings are not supported"),
    "return_tokens": (_is(False), "return_tokens is not supported"),
    "post_sampling_probs": (_is(False), "post-sampling probabilities are not supported"),
    "think": (_is(False), "thinking mode is not supported"),
    "thinking": (_empty, "thinking content in messages is not supported"),
    "reasoning_effort": (_empty, "reasoning_effort is not supported"),
    "modalities": (lambda v, b: v is None or v == ["text"], "only text output is supported"),
    "audio": (_empty, "audio output is not supported"),
    "prediction": (_empty, "predicted outputs are not supported"),
    "web_search_options": (_empty, "web search is not supported"),
    "store": (_is(False), "stored completions are not supported"),
    "template": (_empty, "per-request prompt templates are not supported"),
    "best_of": (_is(1), "best_of is not supported (use n)"),
    # no effect on the output by design (documented in docs/server.md)
    "user": (_any, ""),  # an end-user id for abuse tracking: nothing to do locally
    "metadata": (_any, ""),  # OpenAI request tags
    "service_tier": (_any, ""),  # one tier here
    "cache_prompt": (_any, ""),  # the prefix cache is exact: using it never changes an answer
    "id_slot": (_any, ""),  # llama.cpp slot pinning: the prefix cache here is shared by all
    "keep_alive": (_any, ""),  # Ollama residency: the one model stays loaded until exit
    "time": (_any, ""),  # llama.vscode's timestamp on an input_extra chunk
    "penalize_newline": (_any, ""),  # Ollama ignores it too (removed from its runner)
    "num_keep": (_any, ""),  # tokens kept on context shift: we never shift, we refuse overflow
    # Ollama load-time options: fixed when the server starts
    **{
        name: (_is(), f"'{name}' is a load-time option: set it when starting the server")
        for name in (
            "numa num_batch num_gpu main_gpu low_vram f16_kv logits_all vocab_only use_mmap "
            "use_mlock embedding_only num_thread"
        ).split()
    },
}


def check_extra(extra: Mapping[str, Any], body: Mapping[str, Any]) -> None:
    """400 for the first undeclared field that asks for something we do not do."""
    for name, value in extra.items():
        entry = UNSUPPORTED.get(name)
        if entry is None:
            raise FieldError(
                f"Unrecognized request argument supplied: {ascii(name)[1:-1]}",
                code="unknown_parameter",
                param=name,
            )
        neutral, why = entry
        if not neutral(value, body):
            raise FieldError(
                f"'{name}' is not supported by this server: {why}",
                code="unsupported_parameter",
                param=name,
            )


def find_bad_text(data: Any, path: str = "") -> str | None:
    """The location (`messages[0].content`) of the first string, or dict key, that is not
    valid Unicode (a lone surrogate); None if there is none."""
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            return path or "body"
        return None
    if isinstance(data, list):
        for i, item in enumerate(data):
            if (bad := find_bad_text(item, f"{path}[{i}]")) is not None:
                return bad
    elif isinstance(data, dict):
        for key, item in data.items():
            sub = f"{path}.{key}" if path else str(key)
            if find_bad_text(key) is not None:
                return f"{path}.<key>" if path else "<key>"
            if (bad := find_bad_text(item, sub)) is not None:
                return bad
    return None
