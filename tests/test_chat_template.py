"""Chat templates: real-style templates rendered exactly, fallbacks, helpers, sandbox, errors."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from localllm.chat_template import ChatTemplate
from localllm.errors import RequestError
from localllm.formats.gguf import GGUFFile
from localllm.tokenizer import Tokenizer
from localllm.tokenizer.bpe import byte_alphabet

# Meta-Llama-3-8B-Instruct's template, verbatim
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)
# Qwen2.5-style ChatML template with a tools section (whitespace control as upstream)
QWEN_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant") %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""
CHAT = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi!"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "How are you?"},
]
LLAMA3_EXPECTED = (
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
)
CHATML_EXPECTED = (
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
    "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def bpe_tokenizer(specials: list[str], bos: str | None, eos: str, **meta: object) -> Tokenizer:
    """A byte-level vocabulary (no merges) plus the given control tokens."""
    tokens = [*byte_alphabet(), *specials]
    metadata: dict[str, object] = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.merges": [],
        "tokenizer.ggml.token_type": [1] * 256 + [3] * len(specials),
        "tokenizer.ggml.eos_token_id": tokens.index(eos),
        **meta,
    }
    if bos is not None:
        metadata["tokenizer.ggml.bos_token_id"] = tokens.index(bos)
    return Tokenizer.from_gguf(metadata)


@pytest.fixture(scope="module")
def llama3_tok() -> Tokenizer:
    specials = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eot_id|>",
    ]
    return bpe_tokenizer(specials, "<|begin_of_text|>", "<|end_of_text|>")


@pytest.fixture(scope="module")
def qwen_tok() -> Tokenizer:
    return bpe_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None, "<|im_end|>")


def test_llama3_template_exact(llama3_tok: Tokenizer) -> None:
    ct = ChatTemplate.from_metadata({"tokenizer.chat_template": LLAMA3_TEMPLATE}, llama3_tok)
    assert ct.name == "gguf" and ct.renders_bos
    assert ct.render(CHAT) == LLAMA3_EXPECTED
    no_prompt = ct.render(CHAT, add_generation_prompt=False)
    assert no_prompt == LLAMA3_EXPECTED.removesuffix(
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    ids = llama3_tok.encode(ct.render(CHAT), add_special=not ct.renders_bos)
    assert ids.count(llama3_tok.bos_id) == 1 and ids[0] == llama3_tok.bos_id
    assert ids.count(llama3_tok.token_id("<|eot_id|>")) == 4


def test_chatml_template_exact_and_tools(qwen_tok: Tokenizer) -> None:
    ct = ChatTemplate.from_metadata({"tokenizer.chat_template": QWEN_TEMPLATE}, qwen_tok)
    assert not ct.renders_bos
    assert ct.render(CHAT) == CHATML_EXPECTED
    default_system = (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. "
        "You are a helpful assistant.<|im_end|>\n"
    )
    assert (
        ct.render(CHAT[1:2])
        == default_system + "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
    )
    tool = {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Météo <b>&</b>",
            "parameters": {"type": "object"},
        },
    }
    text = ct.render(CHAT[:2], tools=[tool])
    assert text.startswith("<|im_start|>system\nYou are helpful.\n\n# Tools\n\n<tools>\n")
    assert json.dumps(tool, ensure_ascii=False) in text  # no HTML escaping, no \u00e9
    assert text.endswith(
        "</tools><|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
    )


def test_fallbacks_by_vocabulary(
    llama3_tok: Tokenizer, qwen_tok: Tokenizer, testdata: Path
) -> None:
    ct = ChatTemplate.from_metadata({}, llama3_tok)
    assert ct.name == "llama-3" and ct.renders_bos and ct.render(CHAT) == LLAMA3_EXPECTED
    ct = ChatTemplate.from_metadata({}, qwen_tok)
    assert ct.name == "chatml" and not ct.renders_bos and ct.render(CHAT) == CHATML_EXPECTED
    meta = GGUFFile(testdata / "models" / "stories260K.gguf").metadata
    stories = Tokenizer.from_gguf(meta)
    ct = ChatTemplate.from_metadata(meta, stories)
    assert ct.name == "llama-2" and ct.renders_bos
    expected = (
        "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi! [/INST] Hello. </s>"
        "<s>[INST] How are you? [/INST]"
    )
    assert ct.render(CHAT) == expected
    ids = stories.encode(ct.render(CHAT), add_special=not ct.renders_bos)
    assert ids[0] == stories.bos_id and ids.count(stories.bos_id) == 2
    gpt2_meta = GGUFFile(testdata / "vocab" / "ggml-vocab-gpt-2.gguf").metadata
    assert ChatTemplate.from_metadata(gpt2_meta, Tokenizer.from_gguf(gpt2_meta)).name == "chatml"


def test_content_as_text_parts(qwen_tok: Tokenizer) -> None:
    ct = ChatTemplate.builtin("chatml", qwen_tok)
    parts = [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]
    assert ct.render([{"role": "user", "content": parts}]) == (
        "<|im_start|>user\nHi\nthere<|im_end|>\n<|im_start|>assistant\n"
    )
    image = [{"type": "image_url", "image_url": {"url": "http://x"}}]
    with pytest.raises(RequestError, match="image_url"):
        ct.render([{"role": "user", "content": image}])
    with pytest.raises(RequestError, match="role"):
        ct.render([{"content": "no role"}])


def test_raise_exception_and_syntax_errors(qwen_tok: Tokenizer) -> None:
    strict = (
        "{% if messages[0]['role'] != 'user' %}"
        "{{ raise_exception('Conversation roles must start with user') }}{% endif %}ok"
    )
    ct = ChatTemplate(strict, qwen_tok, "strict")
    assert ct.render([{"role": "user", "content": "x"}]) == "ok"
    with pytest.raises(
        RequestError, match="^chat template: Conversation roles must start with user$"
    ):
        ct.render(CHAT)
    broken = ChatTemplate.from_metadata(
        {"tokenizer.chat_template": "{% for m in messages %}"}, qwen_tok
    )
    with pytest.raises(RequestError, match="syntax error") as err:
        broken.render(CHAT)
    assert "\n" not in str(err.value)


def test_sandbox_blocks_python_internals(qwen_tok: Tokenizer) -> None:
    user = [{"role": "user", "content": "x"}]
    assert "class" not in ChatTemplate("[{{ ''.__class__ }}]", qwen_tok, "t").render(user)
    escape = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(RequestError, match="unsafe"):
        ChatTemplate(escape, qwen_tok, "t").render(user)
    with pytest.raises(RequestError):
        ChatTemplate("{{ messages.append(1) }}", qwen_tok, "t").render(user)


def test_helpers(qwen_tok: Tokenizer, llama3_tok: Tokenizer) -> None:
    ct = ChatTemplate(
        "{{ strftime_now('%Y') }}#{{ {'k': 'é<'} | tojson(indent=1) }}#"
        "{{ bos_token }}#{{ eos_token }}#{{ extra }}",
        llama3_tok,
        "t",
    )
    year, js, bos, eos, extra = ct.render([], extra="kw").split("#")
    assert year == str(datetime.now().year)
    assert js == '{\n "k": "é<"\n}'
    assert (bos, eos, extra) == ("<|begin_of_text|>", "<|end_of_text|>", "kw")
    loop = ChatTemplate(
        "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
        "{{ m.content }}{% endfor %}",
        qwen_tok,
        "t",
    )
    assert loop.render(CHAT) == "You are helpful."
    gen = ChatTemplate(
        "{% generation %}{{ messages[0].content }}{% endgeneration %}", qwen_tok, "t"
    )
    assert gen.render(CHAT) == "You are helpful."
    with pytest.raises(RequestError, match="unknown chat template"):
        ChatTemplate.builtin("vicuna", qwen_tok)
