"""Chat templates: the model file's Jinja template, or a built-in fallback.

Rendering matches Hugging Face `apply_chat_template` (see `chat_sandbox`: the sandboxed
environment, its helpers and its size limits) and runs in a helper process with a wall-clock
bound (`chat_worker`), so a broken or hostile template costs one failed request, never a hung
or crashed process. Nothing is compiled or rendered when a model loads: a plain completion
never touches the template. Message content given as a list of text parts is joined into
one string first. Any template failure (syntax, `raise_exception`, a sandbox violation, a
limit) becomes a one-line `TemplateError`; callers that can go on without the model's
template use `fallback()` (the CLI's `--chat` does, with a warning).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from localllm.chat_sandbox import RenderLimits, TemplateFailure
from localllm.chat_worker import RenderPool, default_pool
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


class TemplateError(RequestError):
    """The chat template cannot render this conversation (the model file's fault)."""

    def __init__(self, message: str, raised: bool = False) -> None:
        super().__init__(message, code="chat_template_error")
        self.raised = raised  # the template called raise_exception (it refused the input)


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

    def __init__(
        self,
        source: str,
        tokenizer: Tokenizer,
        name: str,
        limits: RenderLimits | None = None,
        pool: RenderPool | None = None,
    ) -> None:
        self.name = name
        self.source = source
        self.limits = limits or RenderLimits()
        self._pool = pool
        self._tokenizer = tokenizer
        self._bos = _special_text(tokenizer, tokenizer.bos_id)
        self._eos = _special_text(tokenizer, tokenizer.eos_id)
        self._renders_bos: bool | None = None

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any], tokenizer: Tokenizer) -> ChatTemplate:
        """The GGUF file's template (not compiled yet), or the built-in one its vocabulary
        suits."""
        return cls.from_model(metadata.get(METADATA_KEY), tokenizer, "gguf")

    @classmethod
    def from_model(cls, source: Any, tokenizer: Tokenizer, origin: str) -> ChatTemplate:
        """The model's template text (`origin` names where it came from), or the built-in one
        its vocabulary suits when it has none."""
        if isinstance(source, str) and source.strip():
            return cls(source, tokenizer, origin)
        name = fallback_name(tokenizer)
        return cls(FALLBACKS[name], tokenizer, name)

    @classmethod
    def builtin(cls, name: str, tokenizer: Tokenizer) -> ChatTemplate:
        if name not in FALLBACKS:
            raise RequestError(
                f"unknown chat template {name!r} (built in: {', '.join(sorted(FALLBACKS))})"
            )
        return cls(FALLBACKS[name], tokenizer, name)

    @property
    def is_builtin(self) -> bool:
        return self.name in FALLBACKS and self.source == FALLBACKS[self.name]

    def fallback(self) -> ChatTemplate:
        """The built-in template for this vocabulary, to use when this one fails."""
        return ChatTemplate.builtin(fallback_name(self._tokenizer), self._tokenizer)

    def render(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **kwargs: Any
    ) -> str:
        """The prompt text; kwargs (tools, documents, enable_thinking ...) reach the template."""
        context = {"bos_token": self._bos, "eos_token": self._eos, "tools": None, **kwargs}
        context["messages"] = normalize_messages(messages)
        context["add_generation_prompt"] = add_generation_prompt
        pool = self._pool or default_pool()
        try:
            return pool.render(self.source, context, self.limits)
        except TemplateFailure as e:
            if e.raised:
                raise TemplateError(f"chat template: {e}", raised=True) from None
            raise TemplateError(f"chat template {self.name!r} failed: {e}") from None

    def render_or_fallback(
        self, messages: list[dict[str, Any]], warn: Callable[[str], None]
    ) -> tuple[str, ChatTemplate]:
        """Render with this template or, if it fails (or the file has none), with the built-in
        one, saying so through `warn`; returns the text and the template that made it."""
        if self.is_builtin:
            warn(f"the model has no chat template; using the built-in {self.name!r} template")
            return self.render(messages), self
        try:
            return self.render(messages), self
        except TemplateError as e:
            other = self.fallback()
            warn(f"{e}; using the built-in {other.name!r} template instead")
            return other.render(messages), other

    @property
    def renders_bos(self) -> bool:
        """Whether rendered prompts start with the BOS text (then the caller adds none)."""
        if self._renders_bos is None:
            self._renders_bos = self._probe_bos()
        return self._renders_bos

    def _probe_bos(self) -> bool:
        if not self._bos:
            return False
        probes = (
            [{"role": "user", "content": "Hi"}],
            [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}],
        )
        for probe in probes:
            try:
                return self.render(probe).startswith(self._bos)
            except TemplateError as e:
                if not e.raised:  # broken, not picky about the conversation: stop here
                    return False
        return False


def _special_text(tokenizer: Tokenizer, token_id: int | None) -> str:
    return tokenizer.token_text(token_id) if token_id is not None else ""
