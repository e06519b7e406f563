"""Our tokenizers as a grammar engine sees them: the exact output bytes of every token."""

from __future__ import annotations

import random

import pytest
from structured_models import compiler, tokenizer

from localllm.structured.vocab import TokenTable
from localllm.tokenizer import IncrementalDetokenizer

NAMES = ["stories", "llama2", "gpt2", "deepseek", "smollm2"]
TEXTS = [
    '{"name": "Ada", "tags": ["x", "y"], "n": -1.5e3, "ok": true, "none": null}',
    "  leading spaces, tabs\tand\nnewlines\n",
    "Ünïcödé: 日本語 🦙 — “quotes”",
    "<0x41> is not a byte token here",
]


@pytest.mark.parametrize("name", NAMES)
def test_every_token_renders_as_the_detokenizer_renders_it(name: str) -> None:
    tok = tokenizer(name)
    table = TokenTable.from_tokenizer(tok)
    assert table.vocab_size == tok.vocab_size and table.stop_ids
    for i in range(tok.vocab_size):
        want = tok.decode([i], continuation=True)
        assert table.token_bytes[i].decode("utf-8", errors="replace") == want, i
        if table.is_special(i):
            assert table.token_bytes[i] == b"" and (tok.is_special(i) or want == "")
    rng = random.Random(0)
    text_ids = [i for i in range(tok.vocab_size) if not table.is_special(i)]
    for _ in range(20):  # sequences: multi-byte characters split over tokens
        ids = [rng.choice(text_ids) for _ in range(30)]
        detok = IncrementalDetokenizer(tok, continuation=True)
        text = "".join(detok.add([t]) for t in ids) + detok.flush()
        assert table.text_bytes(ids).decode("utf-8", errors="replace") == text


@pytest.mark.parametrize("name", NAMES)
def test_engine_tokenizer_agrees_with_ours(name: str) -> None:
    tok = tokenizer(name)
    comp = compiler(name)
    llg_tok = comp.llg_tokenizer
    assert llg_tok.vocab_size == tok.vocab_size
    assert sorted(llg_tok.eos_tokens) == sorted(tok.stop_ids)
    for text in TEXTS:
        ids = tok.encode(text, add_special=False, parse_special=False, continuation=True)
        assert comp.table.text_bytes(ids) == text.encode()  # continuation: no dummy space
        assert llg_tok.decode_bytes(ids) == text.encode()
        assert llg_tok.tokenize_str(text) == ids
    for i in range(tok.vocab_size):
        if comp.table.is_special(i):
            assert llg_tok.is_special_token(i), (i, tok.token_text(i))


def test_byte_fallback_tokens_are_their_byte() -> None:
    tok = tokenizer("llama2")
    table = TokenTable.from_tokenizer(tok)
    for b in (0x00, 0x0A, 0x7B, 0x80, 0xFF):
        tid = tok.token_id(f"<0x{b:02X}>")
        assert tid is not None and table.token_bytes[tid] == bytes([b])
    ids = tok.encode("🦙", add_special=False, continuation=True)  # not in the vocab: 4 bytes
    assert [tok.token_text(i) for i in ids] == ["<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"]
    assert table.text_bytes(ids) == "🦙".encode()


def test_greedy_encode_spells_the_bytes() -> None:
    table = TokenTable.from_tokenizer(tokenizer("stories"))
    for text in TEXTS:
        ids = table.greedy_encode(text.encode())
        assert table.text_bytes(ids) == text.encode()
        assert not any(table.is_special(i) for i in ids)


@pytest.mark.parametrize("name", ["stories", "smollm2"])
def test_tokenizer_json_tokenizers_map_exactly_too(name: str, tmp_path) -> None:
    """A Hugging Face folder's tokenizer.json (SentencePiece or byte-level) gives the same
    token bytes as the GGUF vocabulary it was written from."""
    from hf_build import write_tokenizer_files
    from structured_models import SOURCES

    from localllm.formats.gguf import GGUFFile
    from localllm.sources.hf import folder_tokenizer

    g = GGUFFile(str(SOURCES[name]()))
    write_tokenizer_files(g, tmp_path)
    ids = {k: g.get(f"tokenizer.ggml.{k}") for k in ("bos_token_id", "eos_token_id")}
    hf = folder_tokenizer(tmp_path, ids, tokenizer(name).vocab_size)
    a, b = TokenTable.from_tokenizer(tokenizer(name)), TokenTable.from_tokenizer(hf)
    assert a.token_bytes == b.token_bytes and a.stop_ids == b.stop_ids
    for text in TEXTS:
        ids_hf = hf.encode(text, add_special=False, parse_special=False, continuation=True)
        assert b.text_bytes(ids_hf) == text.encode()
