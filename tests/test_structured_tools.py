"""Tool calls: template formats (real templates), prompts, parsing, streaming, forced calls."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from structured_models import compiler, tokenizer

from localllm.chat_template import ChatTemplate
from localllm.structured.constraint import Constraint
from localllm.structured.spec import ConstraintError
from localllm.structured.tools.formats import FORMATS, GENERIC, detect_format
from localllm.structured.tools.grammar import tool_call_spec
from localllm.structured.tools.parser import parse_answer
from localllm.structured.tools.prompt import render_with_tools
from localllm.structured.tools.stream import ToolStreamParser

TEMPLATES = Path(__file__).parent / "data" / "chat_templates"
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather now", "parameters": WEATHER},
    },
    {"type": "function", "function": {"name": "now", "description": "The time"}},
]
ARGS = {"city": "Paris", "unit": "C"}
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "abcDEF123",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps(ARGS)},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "abcDEF123", "content": "18 C, sunny"},
]
# template file -> (format, text between these markers is the rendered assistant call)
CASES = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": ("hermes", "<|im_start|>assistant\n", "<|im_end|>"),
    "meta-llama-Llama-3.2-3B-Instruct.jinja": (
        "llama3",
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|eot_id|>",
    ),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": ("mistral", "[/INST]", "</s>"),
}


def template(name: str) -> ChatTemplate:
    return ChatTemplate((TEMPLATES / name).read_text(), tokenizer("llama2"), name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_templates_render_tools_and_their_calls_parse_back(name: str) -> None:
    fmt_name, before, after = CASES[name]
    t = template(name)
    fmt = detect_format(t.source)
    assert fmt.name == fmt_name
    prompt = render_with_tools(t, fmt, CONVERSATION, TOOLS)
    assert "get_weather" in prompt and "18 C, sunny" in prompt
    rendered_call = prompt.split(before, 1)[1].split(after, 1)[0]
    parsed = parse_answer(fmt, rendered_call)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [("get_weather", ARGS)]
    assert parsed.content == ""


def test_templates_without_tools_get_the_generic_prompt() -> None:
    t = ChatTemplate.builtin("chatml", tokenizer("llama2"))
    assert detect_format(t.source) is GENERIC
    prompt = render_with_tools(t, GENERIC, CONVERSATION, TOOLS)
    assert prompt.count("<|im_start|>system\nBe brief.\n\nYou can call these tools") == 1
    assert '{"name": "get_weather", "description": "Weather now"' in prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"' in prompt
    assert "<|im_start|>user\n<tool_response>\n18 C, sunny\n</tool_response>" in prompt
    no_tools = render_with_tools(t, GENERIC, CONVERSATION[:2], None)
    assert "tool" not in no_tools


def answer_text(fmt_name: str, calls: list[tuple[str, dict[str, Any]]], content: str = "") -> str:
    fmt = FORMATS[fmt_name]
    key = fmt.args_key
    bodies = [json.dumps({"name": n, key: a}) for n, a in calls]
    if fmt.list_open:
        return content + fmt.list_open + fmt.separator.join(bodies) + fmt.list_close
    return content + fmt.separator.join(fmt.open + b + fmt.close for b in bodies)


@pytest.mark.parametrize("fmt_name", ["hermes", "mistral", "llama3", "generic"])
def test_streamed_deltas_reassemble_to_the_parsed_calls(fmt_name: str) -> None:
    fmt = FORMATS[fmt_name]
    calls = [("get_weather", {"city": 'Pa"r}is', "unit": "C"}), ("now", {})]
    calls = calls if fmt.parallel else calls[:1]
    content = "" if fmt_name == "llama3" else "Let me check.\n"
    text = answer_text(fmt_name, calls, content)
    rng = random.Random(1)
    for _ in range(5):
        parser = ToolStreamParser(fmt)
        got_content = ""
        got: dict[int, dict[str, str]] = {}
        pos = 0
        deltas = []
        while pos < len(text):
            step = rng.randint(1, 6)
            deltas.append(parser.feed(text[pos : pos + step]))
            pos += step
        last, parsed = parser.finish()
        for d in [*deltas, last]:
            got_content += d.content
            for tc in d.tool_calls:
                entry = got.setdefault(tc["index"], {"name": "", "arguments": "", "id": ""})
                if "id" in tc:
                    entry["id"], entry["name"] = tc["id"], tc["function"]["name"]
                entry["arguments"] += tc["function"]["arguments"]
        assert got_content.strip() == content.strip()
        assert [(g["name"], json.loads(g["arguments"])) for g in got.values()] == calls
        assert [(c.name, c.arguments) for c in parsed.calls] == [
            (g["name"], g["arguments"]) for g in got.values()
        ]
        assert len({g["id"] for g in got.values()}) == len(calls)


def test_plain_answers_stay_content_and_markers_are_held_back() -> None:
    for fmt in FORMATS.values():
        assert parse_answer(fmt, "Hello, no tools needed.").calls == []
    hermes = ToolStreamParser(FORMATS["hermes"])
    assert hermes.feed("Sure <tool").content == "Sure "
    assert hermes.feed("box> is a word").content == "<toolbox> is a word"
    llama = ToolStreamParser(FORMATS["llama3"])
    assert llama.feed('{"an').content == ""
    assert llama.feed('swer": 1}').content == '{"answer": 1}'
    last, parsed = llama.finish()
    assert parsed.calls == [] and parsed.content == '{"answer": 1}'


def test_mistral_calls_without_their_control_token() -> None:
    """[TOOL_CALLS] is a control token: the detokenizer drops it from the text."""
    parsed = parse_answer(FORMATS["mistral"], '[{"name": "now", "arguments": {}}]')
    assert [(c.name, c.arguments) for c in parsed.calls] == [("now", "{}")]


def test_parallel_off_keeps_the_first_call() -> None:
    parser = ToolStreamParser(FORMATS["hermes"], parallel=False)
    text = answer_text("hermes", [("now", {}), ("get_weather", ARGS)])
    deltas = [parser.feed(text)]
    _, parsed = parser.finish()
    assert [c.name for c in parsed.calls] == ["now"]
    assert {tc["index"] for d in deltas for tc in d.tool_calls} == {0}


@pytest.mark.parametrize("fmt_name", ["hermes", "mistral", "llama3", "generic"])
def test_forced_call_grammar_accepts_valid_calls_only(fmt_name: str) -> None:
    fmt = FORMATS[fmt_name]
    comp = compiler("smollm2")
    tok = comp.tokenizer

    def run(spec: Any, text: str) -> tuple[int, int, Constraint]:
        c = Constraint(comp, comp.compile(spec))
        ids = tok.encode(text, add_special=False, parse_special=False, continuation=True)
        return c.valid_prefix(ids), len(ids), c

    any_tool = tool_call_spec(fmt, TOOLS, None, True, comp.special_id)
    calls = [("get_weather", ARGS), ("now", {})] if fmt.parallel else [("get_weather", ARGS)]
    kept, total, c = run(any_tool, answer_text(fmt_name, calls))
    assert kept == total
    for bad in (
        answer_text(fmt_name, [("get_weather", {"city": "Paris"})]),  # unit is required
        answer_text(fmt_name, [("delete_all", {})]),
        answer_text(fmt_name, [("get_weather", ARGS)], content="Sure. "),
    ):
        kept, total, _ = run(any_tool, bad)
        assert kept < total, bad
    named = tool_call_spec(fmt, TOOLS, "now", True, comp.special_id)
    assert (
        run(named, answer_text(fmt_name, [("now", {})]))[0]
        == run(named, answer_text(fmt_name, [("now", {})]))[1]
    )
    kept, total, _ = run(named, answer_text(fmt_name, [("get_weather", ARGS)]))
    assert kept < total
    single = tool_call_spec(fmt, TOOLS, None, False, comp.special_id)
    if fmt.parallel:
        kept, total, _ = run(single, answer_text(fmt_name, [("now", {}), ("now", {})]))
        assert kept < total
    # what the grammar lets through parses into calls whose arguments validate
    parsed = parse_answer(fmt, answer_text(fmt_name, calls))
    jsonschema.validate(json.loads(parsed.calls[0].arguments), WEATHER)


def test_forced_call_errors_name_the_field() -> None:
    comp = compiler("smollm2")
    with pytest.raises(ConstraintError, match="tool_choice names 'nope'"):
        tool_call_spec(FORMATS["hermes"], TOOLS, "nope", True, comp.special_id)
    with pytest.raises(ConstraintError, match="at least one tool"):
        tool_call_spec(FORMATS["hermes"], [], None, True, comp.special_id)
    bad_params = [{"type": "function", "function": {"name": "f", "parameters": {"type": "nope"}}}]
    spec = tool_call_spec(FORMATS["hermes"], bad_params, None, True, comp.special_id)
    with pytest.raises(ConstraintError, match="tools"):
        compiler("smollm2").compile(spec)


def test_a_marker_that_is_a_control_token_is_forced_as_that_token() -> None:
    """Mistral's [TOOL_CALLS] is one control token: the grammar asks for it by id, and the
    parser reads the call list the detokenizer leaves (it drops control tokens)."""
    from localllm.structured.compiler import GrammarCompiler
    from localllm.tokenizer import Tokenizer
    from localllm.tokenizer.bpe import byte_alphabet

    alphabet = list(byte_alphabet())
    tokens = [*alphabet, "[TOOL_CALLS]", "</s>"]
    meta = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [1] * 256 + [3, 3],
        "tokenizer.ggml.merges": [],
        "tokenizer.ggml.eos_token_id": 257,
        "tokenizer.ggml.bos_token_id": 257,
    }
    tok = Tokenizer.from_gguf(meta)
    comp = GrammarCompiler(tok)
    assert comp.special_id("[TOOL_CALLS]") == 256 and comp.special_id("a") is None
    fmt = FORMATS["mistral"]
    spec = tool_call_spec(fmt, TOOLS, "get_weather", False, comp.special_id)
    assert "<[256]>" in spec.source
    c = Constraint(comp, comp.compile(spec))
    body = '[{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}]'
    ids = [256, *tok.encode(body, add_special=False, continuation=True)]
    assert c.valid_prefix(ids) == len(ids)
    spelled = tok.encode("[TOOL_CALLS]" + body, add_special=False, parse_special=False)
    assert c.valid_prefix(spelled) == 0
    text = tok.decode(ids, continuation=True)
    assert text == body  # the control token is not in the text
    parsed = parse_answer(fmt, text)
    assert [(p.name, json.loads(p.arguments)) for p in parsed.calls] == [("get_weather", ARGS)]
