"""Prompt token ids for each endpoint: chat (template), completion (text or ids), FIM.

Fill-in-the-middle uses the model's own FIM tokens in prefix-suffix-middle order:
`[BOS] [extra context] <PRE> prefix <SUF> suffix <MID>`; the model then writes the middle.
A model without FIM tokens gets a 400 (as llama.cpp answers): a plain concatenation would
only ever continue the prefix and silently ignore the suffix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from localllm.chat_template import ChatTemplate
from localllm.errors import RequestError
from localllm.tokenizer import Tokenizer

# vocabulary entries that separate files in repo-level FIM context (Qwen2.5-Coder ...)
FILE_SEP_TEXTS = ("<|file_sep|>", "<file_sep>")
# without one, extra chunks are joined as text with this header (the filename filled in)
SNIPPET_HEADER = "\n\n--- {filename} ---\n\n"


def chat_prompt_ids(
    tokenizer: Tokenizer,
    template: ChatTemplate,
    messages: list[dict[str, Any]],
    **template_kwargs: Any,
) -> list[int]:
    text = template.render(messages, add_generation_prompt=True, **template_kwargs)
    return tokenizer.encode(text, add_special=not template.renders_bos, parse_special=True)


def completion_prompts(
    tokenizer: Tokenizer, prompt: str | list[str] | list[int] | list[list[int]]
) -> list[list[int]]:
    """One id list per prompt: text gets BOS as the model asks; token lists pass as given."""
    if isinstance(prompt, str):
        return [tokenizer.encode(prompt, add_special=True, parse_special=True)]
    if not prompt:
        raise RequestError("prompt must not be an empty list", param="prompt")
    if all(isinstance(p, int) for p in prompt):
        return [list(prompt)]  # type: ignore[arg-type]
    out = []
    for p in prompt:
        if isinstance(p, str):
            out.append(tokenizer.encode(p, add_special=True, parse_special=True))
        else:
            out.append(list(p))  # type: ignore[arg-type]
    return out


def text_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    # user text never turns into special tokens
    return tokenizer.encode(text, add_special=False, parse_special=False) if text else []


def _require_fim(tokenizer: Tokenizer, param: str) -> tuple[int, int, int]:
    if tokenizer.fim_ids is None:
        raise RequestError(
            "this model has no fill-in-the-middle tokens (<|fim_prefix|>/<|fim_suffix|>/"
            "<|fim_middle|> or the GGUF fim_* keys), so it cannot fill in code; use a code "
            "model trained for FIM",
            code="fim_not_supported",
            param=param,
        )
    return tokenizer.fim_ids


def extra_context_ids(tokenizer: Tokenizer, chunks: Sequence[tuple[str, str]]) -> list[int]:
    """Repo-level context (filename, text) before the FIM prefix."""
    sep = next((i for t in FILE_SEP_TEXTS if (i := tokenizer.token_id(t)) is not None), None)
    out: list[int] = []
    for filename, text in chunks:
        if sep is not None:
            out += [sep] + text_ids(tokenizer, f"{filename}\n{text}")
        else:
            out += text_ids(tokenizer, SNIPPET_HEADER.format(filename=filename) + text)
    return out


def fim_layout(
    tokenizer: Tokenizer,
    prefix_ids: list[int],
    suffix_ids: list[int],
    extra_ids: list[int],
    param: str = "suffix",
) -> list[int]:
    """`[BOS] extra <PRE> prefix <SUF> suffix <MID>` from already tokenized parts."""
    pre, suf, mid = _require_fim(tokenizer, param)
    bos = [tokenizer.bos_id] if tokenizer.add_bos and tokenizer.bos_id is not None else []
    return bos + extra_ids + [pre] + prefix_ids + [suf] + suffix_ids + [mid]


def fim_prompt_ids(
    tokenizer: Tokenizer,
    prefix: str,
    suffix: str,
    extra: Sequence[tuple[str, str]] = (),
    param: str = "suffix",
) -> list[int]:
    _require_fim(tokenizer, param)
    return fim_layout(
        tokenizer,
        text_ids(tokenizer, prefix),
        text_ids(tokenizer, suffix),
        extra_context_ids(tokenizer, extra),
        param,
    )


def fit_fim(
    prefix_ids: list[int], suffix_ids: list[int], extra_ids: list[int], budget: int
) -> tuple[list[int], list[int], list[int], bool]:
    """Trim FIM parts to `budget` tokens the way llama.cpp does: the prefix keeps its end (up
    to 3/4 of the budget), the suffix its start, extra context its end; True if trimmed."""
    budget = max(budget, 0)
    n_prefix = min(len(prefix_ids), 3 * budget // 4)
    n_suffix = min(len(suffix_ids), budget - n_prefix)
    n_prefix = min(len(prefix_ids), budget - n_suffix)  # give the suffix's unused share back
    n_extra = min(len(extra_ids), budget - n_prefix - n_suffix)
    trimmed = (n_prefix, n_suffix, n_extra) != (len(prefix_ids), len(suffix_ids), len(extra_ids))
    prefix = prefix_ids[len(prefix_ids) - n_prefix :]
    extra = extra_ids[len(extra_ids) - n_extra :]
    return prefix, suffix_ids[:n_suffix], extra, trimmed
