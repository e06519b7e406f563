"""Streaming detokenizer: deltas never split a UTF-8 character and add up to `decode`."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localllm.formats.gguf import GGUFFile
from localllm.tokenizer import IncrementalDetokenizer, Tokenizer

MODELS = {
    "pycode": ("models", "pycode-22m-q8_0.gguf"),  # 4k vocab: most non-ASCII is byte fallback
    "llama2": ("models", "llama-2-tiny-random.gguf"),
    "gpt2": ("vocab", "ggml-vocab-gpt-2.gguf"),  # byte-level BPE: tokens end mid-character
}
TEXTS = [
    "日本語のテキスト、中文混合です。",
    "Emoji: 🦙🚀🫠 and 😶‍🌫️ and flags 🇫🇷🇯🇵!",
    "Accents: àéîõü ÅØ ç ñ ß — “quotes” … ½",
    "mixed 한국어 text with math 𝔘𝔫𝔦 and code `x = 1`\n",
]


@cache
def load(path: str) -> Tokenizer:
    return Tokenizer.from_gguf(GGUFFile(path).metadata)


def tokenizer(testdata: Path, name: str) -> Tokenizer:
    return load(str(testdata.joinpath(*MODELS[name])))


def stream(tok: Tokenizer, ids: list[int], **opts: bool) -> list[str]:
    detok = IncrementalDetokenizer(tok, **opts)
    deltas = [detok.add([t]) for t in ids]
    deltas.append(detok.flush())
    assert detok.text == "".join(deltas)
    return deltas


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("text", TEXTS, ids=["cjk", "emoji", "accents", "mixed"])
def test_stream_token_by_token(testdata: Path, name: str, text: str) -> None:
    tok = tokenizer(testdata, name)
    ids = tok.encode(text)
    deltas = stream(tok, ids)
    assert all("\ufffd" not in d for d in deltas)
    assert "".join(deltas) == tok.decode(ids) == text
    held_back = sum(1 for d in deltas[:-1] if not d)
    assert held_back > 0  # some tokens end inside a character and must be held back


def test_four_byte_emoji_over_byte_tokens(testdata: Path) -> None:
    tok = tokenizer(testdata, "pycode")
    ids = tok.encode("🫠", add_special=False)  # U+1FAE0, not a piece of this vocabulary
    pieces = [tok.token_text(t) for t in ids]
    assert pieces[-4:] == ["<0xF0>", "<0x9F>", "<0xAB>", "<0xA0>"]
    detok = IncrementalDetokenizer(tok)
    out = [detok.add([t]) for t in ids]
    assert out[-4:-1] == ["", "", ""] and out[-1] == "🫠"
    assert detok.flush() == "" and detok.text == tok.decode(ids) == "🫠"


def test_invalid_bytes_become_replacement_at_once(testdata: Path) -> None:
    tok = tokenizer(testdata, "pycode")
    byte = {b: tok.token_id(f"<0x{b:02X}>") for b in (0xE2, 0x82, 0xFF)}
    a = tok.encode("a", add_special=False)
    detok = IncrementalDetokenizer(tok)
    assert detok.add(a) == "a"
    assert detok.add([byte[0xE2]]) == ""  # could still become a character: held back
    assert detok.add([byte[0xFF]]) == "\ufffd\ufffd"  # now clearly invalid, both bytes
    assert detok.add([byte[0xE2], byte[0x82]]) == ""
    assert detok.flush() == "\ufffd"  # the stream ended inside a character
    ids = [*a, byte[0xE2], byte[0xFF], byte[0xE2], byte[0x82]]
    assert detok.text == tok.decode(ids) == "a\ufffd\ufffd\ufffd"


def test_specials_and_leading_space_follow_decode(testdata: Path) -> None:
    tok = tokenizer(testdata, "llama2")
    ids = [tok.bos_id, *tok.encode("Hi there", add_special=False), tok.eos_id]
    for opts in ({}, {"skip_special": False}, {"continuation": True}):
        assert "".join(stream(tok, ids, **opts)) == tok.decode(ids, **opts)
    assert tok.decode(ids) == "Hi there"
    assert tok.decode(ids, skip_special=False) == "<s>Hi there</s>"
    assert "".join(stream(tok, tok.encode("Hi", add_special=False), continuation=True)) == " Hi"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40),
    cut=st.integers(min_value=1, max_value=5),
)
def test_chunked_stream_equals_decode(testdata: Path, text: str, cut: int) -> None:
    tok = tokenizer(testdata, "pycode")
    ids = tok.encode(text)
    detok = IncrementalDetokenizer(tok)
    parts = [detok.add(ids[i : i + cut]) for i in range(0, len(ids), cut)]
    parts.append(detok.flush())
    assert all("\ufffd" not in p for p in parts)
    assert "".join(parts) == tok.decode(ids) == text
