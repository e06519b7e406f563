"""Chat templates: the model file's Jinja template (sandboxed), or a built-in fallback.

Rendering matches Hugging Face `apply_chat_template`: an `ImmutableSandboxedEnvironment`
with `trim_blocks` and `lstrip_blocks`, the `loopcontrols` extension, `raise_exception`,
`strftime_now`, a `tojson` that does not HTML-escape, and `bos_token` / `eos_token`. Message
content given as a list of text parts is joined into one string first. Any template failure
(syntax, `raise_exception`, a sandbox violation) becomes a one-line `RequestError`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

from localllm.errors import RequestError
from localllm.tokenizer import Tokenizer

METADATA_KEY = "tokenizer.chat_template"

_LLAMA2 = (
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set system = messages[0]['content'] %}{% set turns = messages[1:] %}"
    "{% else %}{% set system = '' %}{% set turns = messages %}{% endif %}"
    "{% for message in turns %}"
    "{% if message['role'] == 'user' %}"
    "{{ bos_token }}[INST] "
    "{% if loop.first and system %}<<SYS>>\n{{ system | trim }}\n<</SYS>>\n\n{% endif %}"
    "{{ message['content'] | trim }} [/INST]"
    "{% elif message['role'] == 'assistant' %}"
    " {{ message['content'] | trim }} {{ eos_token }}"
    "{% endif %}"
    "{% endfor %}"
)
_LLAMA3 = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
_CHATML = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# built-in templates for files that carry none
FALLBACKS: dict[str, str] = {"llama-2": _LLAMA2, "llama-3": _LLAMA3, "chatml": _CHATML}


class _TemplateRaised(Exception):
    """What `raise_exception` raises inside a template."""


def _raise_exception(message: str) -> None:
    raise _TemplateRaised(str(message))


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """HF's `tojson`: plain `json.dumps`, no HTML escaping, non-ASCII kept."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class _GenerationTag(Extension):
    """Accepts HF's `{% generation %}...{% endgeneration %}` marker and renders its body."""

    tags = {"generation"}

    def parse(self, parser: Any) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.loopcontrols", _GenerationTag],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _one_line(e: BaseException) -> str:
    text = " ".join(str(getattr(e, "message", None) or e).split())
    return text or type(e).__name__


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text":
                texts.append(str(part.get("text", "")))
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise RequestError(
                    f"message content part of type {kind!r} is not supported (text only)",
                    param="messages",
                )
        return "\n".join(texts)
    raise RequestError("message content must be a string or a list of text parts", param="messages")


def normalize_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the messages with `content` as one string (text parts joined by newlines)."""
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise RequestError(f"messages[{i}] needs a string 'role'", param="messages")
        out.append({**msg, "content": _content_text(msg.get("content"))})
    return out


def fallback_name(tokenizer: Tokenizer) -> str:
    """Which built-in template suits a vocabulary that came without one."""
    if tokenizer.token_id("<|start_header_id|>") is not None:
        return "llama-3"
    if tokenizer.token_id("<|im_start|>") is not None:
        return "chatml"
    return "llama-2" if tokenizer.model == "llama" else "chatml"


class ChatTemplate:
    """Renders a conversation to the prompt text the model was trained on."""

    def __init__(self, source: str, tokenizer: Tokenizer, name: str) -> None:
        self.name = name
        self.source = source
        self._bos = _special_text(tokenizer, tokenizer.bos_id)
        self._eos = _special_text(tokenizer, tokenizer.eos_id)
        try:
            self._template = _environment().from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise RequestError(
                f"chat template {name!r} has a syntax error at line {e.lineno}: {_one_line(e)}"
            ) from None
        self.renders_bos: bool = self._probe_bos()

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any], tokenizer: Tokenizer) -> ChatTemplate:
        source = metadata.get(METADATA_KEY)
        if isinstance(source, str) and source.strip():
            return cls(source, tokenizer, "gguf")
        name = fallback_name(tokenizer)
        return cls(FALLBACKS[name], tokenizer, name)

    @classmethod
    def builtin(cls, name: str, tokenizer: Tokenizer) -> ChatTemplate:
        if name not in FALLBACKS:
            raise RequestError(
                f"unknown chat template {name!r} (built in: {', '.join(sorted(FALLBACKS))})"
            )
        return cls(FALLBACKS[name], tokenizer, name)

    def render(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **kwargs: Any
    ) -> str:
        """The prompt text; kwargs (tools, documents, enable_thinking ...) reach the template."""
        context = {"bos_token": self._bos, "eos_token": self._eos, "tools": None, **kwargs}
        context["messages"] = normalize_messages(messages)
        context["add_generation_prompt"] = add_generation_prompt
        try:
            return self._template.render(**context)
        except _TemplateRaised as e:
            raise RequestError(f"chat template: {_one_line(e)}") from None
        except (
            jinja2.TemplateError,
            TypeError,
            ValueError,
            KeyError,
            IndexError,
            AttributeError,
        ) as e:
            raise RequestError(
                f"chat template {self.name!r} failed: {type(e).__name__}: {_one_line(e)}"
            ) from None

    def _probe_bos(self) -> bool:
        """Whether rendered prompts start with the BOS text (then the caller adds none)."""
        if not self._bos:
            return False
        probes = (
            [{"role": "user", "content": "Hi"}],
            [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}],
        )
        for probe in probes:
            try:
                return self.render(probe).startswith(self._bos)
            except RequestError:
                continue
        return False


def _special_text(tokenizer: Tokenizer, token_id: int | None) -> str:
    return tokenizer.token_text(token_id) if token_id is not None else ""
