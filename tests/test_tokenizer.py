"""Tokenizer: llama.cpp's test vectors, SentencePiece agreement, goldens, special ids, speed."""

from __future__ import annotations

import json
import time
from functools import cache
from pathlib import Path

import pytest

from localllm.errors import LocalLLMError, RequestError
from localllm.formats.gguf import GGUFFile
from localllm.tokenizer import Tokenizer
from localllm.tokenizer.bpe import pre_tokenizer


@cache
def gguf_tokenizer(path: str) -> Tokenizer:
    return Tokenizer.from_gguf(GGUFFile(path).metadata)


@cache
def llama3_tokenizer(root: str) -> Tokenizer:
    d = Path(root) / "tokenizers" / "llama3.2-bpe"
    return Tokenizer.from_hf_bpe_files(str(d / "encoder.json"), str(d / "vocab.bpe"))


def read_vectors(testdata: Path, name: str) -> list[tuple[str, list[int]]]:
    """llama.cpp's `.inp` (strings joined by `__ggml_vocab_test__` lines) and `.out` ids."""
    inp = (testdata / "vocab" / f"{name}.inp").read_text(encoding="utf-8")
    out = (testdata / "vocab" / f"{name}.out").read_text(encoding="utf-8")
    texts = inp.split("\n__ggml_vocab_test__\n")
    assert texts[-1] == ""
    texts = texts[:-1]
    lines = out.split("\n")[: len(texts)]
    assert len(lines) == len(texts)
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines, strict=True)]


def vector_tokenizer(testdata: Path, name: str) -> Tokenizer:
    if name == "ggml-vocab-llama-bpe.gguf":
        return llama3_tokenizer(str(testdata))
    return gguf_tokenizer(str(testdata / "vocab" / name))


VECTOR_FILES = [
    "ggml-vocab-llama-spm.gguf",
    "ggml-vocab-gpt-2.gguf",
    "ggml-vocab-llama-bpe.gguf",
    "ggml-vocab-deepseek-coder.gguf",
]


@pytest.mark.parametrize("name", VECTOR_FILES)
def test_llama_cpp_vectors(testdata: Path, name: str) -> None:
    tok = vector_tokenizer(testdata, name)
    cases = read_vectors(testdata, name)
    assert len(cases) > 40
    wrong = [
        (t, want, tok.encode(t, add_special=False))
        for t, want in cases
        if tok.encode(t, add_special=False) != want
    ]
    assert not wrong, wrong[:3]


@pytest.mark.parametrize("name", VECTOR_FILES)
def test_vectors_round_trip(testdata: Path, name: str) -> None:
    tok = vector_tokenizer(testdata, name)
    for text, _ in read_vectors(testdata, name):
        assert tok.decode(tok.encode(text)) == text


def test_qwen2_pretokenizer_on_vectors(testdata: Path) -> None:
    """No Qwen2 vocabulary here, so only the pre-tokenizer is checked against its vectors.

    BPE never merges across pre-tokens, so llama.cpp's id count bounds the piece count; the
    pieces must cover the text exactly; digits stand alone; and a piece that is one printable
    ASCII char maps to GPT-2's byte-alphabet id, which Qwen2 shares for its first 256 ids.
    """
    pre = pre_tokenizer("qwen2")
    single = {chr(c): c - 0x21 for c in range(0x21, 0x7F)}
    for text, ids in read_vectors(testdata, "ggml-vocab-qwen2.gguf"):
        pieces = pre.split(text)
        assert "".join(pieces) == text
        assert len(pieces) <= len(ids), (text, pieces, ids)
        assert all(not (p.isdigit() and len(p) > 1) for p in pieces)
        if len(pieces) == len(ids):  # one token per piece: single chars must match
            for piece, tid in zip(pieces, ids, strict=True):
                if piece in single:
                    assert tid == single[piece], (text, piece, tid)
    assert pre.split("3333 a") == ["3", "3", "3", "3", " a"]
    assert pre_tokenizer("llama-bpe").split("3333 a") == ["333", "3", " a"]


@pytest.mark.parametrize("golden", ["pycode-22m-q8_0_greedy.json", "pycode-22m_greedy_f32.json"])
def test_pycode_prompt_ids(testdata: Path, golden: str) -> None:
    tok = gguf_tokenizer(str(testdata / "models" / "pycode-22m-q8_0.gguf"))
    gold = json.loads((testdata / "golden" / golden).read_text())
    for p in gold["prompts"]:
        assert tok.encode(p["prompt"]) == p["prompt_ids"]


def test_stories_bos_and_real_bytes(testdata: Path) -> None:
    tok = gguf_tokenizer(str(testdata / "models" / "stories260K.gguf"))
    gold = json.loads((testdata / "golden" / "stories260K_greedy.json").read_text())
    assert tok.encode("") == gold["prompt_tokens"] == [tok.bos_id]
    text = tok.decode(gold["greedy_tokens"])
    assert text.startswith("Once upon a time, there was a little girl named Lily.")
    assert "<0x0A>" in gold["text"] and "<0x0A>" not in text
    assert "high.\nLily's mom" in text


def sentencepiece(path: Path):  # noqa: ANN201 - sentencepiece has no type stubs
    spm = pytest.importorskip("sentencepiece")
    return spm.SentencePieceProcessor(model_file=str(path))


def test_pycode_matches_sentencepiece(testdata: Path) -> None:
    tok = gguf_tokenizer(str(testdata / "models" / "pycode-22m-q8_0.gguf"))
    sp = sentencepiece(testdata / "tokenizers" / "pycode.model")
    text = json.loads((testdata / "golden" / "pycode-22m_greedy_f32.json").read_text())[
        "heldout_text"
    ]
    lines = [ln for ln in text.split("\n") if ln][:400]
    assert len(lines) == 400
    for line in lines:
        assert tok.encode(line, add_special=False) == sp.encode(line), line
    block = text[:6000]
    assert tok.encode(block, add_special=False) == sp.encode(block)


VARIED = [
    "Hello world",
    "  two leading spaces",
    "trailing   ",
    "tabs\tand\nnew\n\nlines\n",
    "emoji 🦙🚀😶‍🌫️ ok",
    "日本語のテキストと中文混合",
    "Ünïcödé àccents çà ñ",
    "Привет, мир!",
    "def f(x):\n    return x**2  # comment\n",
    "a" * 300,
    "x" + " " * 50 + "y",
    "nbsp\u00a0and zero\u200bwidth",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math",
    "\r\n windows \r\n",
    "你好" * 60,
    "Καλημέρα κόσμε",
    '{"json": [1, 2.5e-3, null]}',
    "<s> not special here </s>",
]


@pytest.mark.parametrize("text", VARIED, ids=[f"varied{i}" for i in range(len(VARIED))])
def test_llama2_matches_sentencepiece(testdata: Path, text: str) -> None:
    tok = gguf_tokenizer(str(testdata / "models" / "llama-2-tiny-random.gguf"))
    sp = sentencepiece(testdata / "tokenizers" / "llama2.model")
    ids = tok.encode(text, add_special=False, parse_special=False)
    assert ids == sp.encode(text)
    assert tok.decode(ids) == text


def test_special_tokens_parsed_as_whole_strings(testdata: Path) -> None:
    tok = gguf_tokenizer(str(testdata / "models" / "llama-2-tiny-random.gguf"))
    ids = tok.encode("<s>Hi</s>", add_special=False)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert tok.decode(ids, skip_special=False) == "<s>Hi</s>"
    assert tok.decode(ids) == "Hi"
    raw = tok.encode("<s>Hi</s>", add_special=False, parse_special=False)
    assert tok.bos_id not in raw and tok.eos_id not in raw
    assert tok.decode(raw) == "<s>Hi</s>"
    gpt2 = gguf_tokenizer(str(testdata / "vocab" / "ggml-vocab-gpt-2.gguf"))
    assert gpt2.encode("a<|endoftext|>b", add_special=False)[1] == 50256
    assert 50256 not in gpt2.encode("a<|endoftext|>b", add_special=False, parse_special=False)


def test_bos_eos_flags_and_token_views(testdata: Path) -> None:
    tok = gguf_tokenizer(str(testdata / "models" / "llama-2-tiny-random.gguf"))
    assert tok.add_bos and tok.encode("hi")[0] == tok.bos_id
    assert tok.encode("hi", add_special=False)[0] != tok.bos_id
    newline = tok.encode("\n", add_special=False)[-1]
    assert tok.token_text(newline) == "<0x0A>" and tok.token_bytes(newline) == b"\n"
    the = tok.token_id("▁the")
    assert the is not None and tok.token_bytes(the) == b" the" and tok.token_to_str(the) == " the"
    assert tok.is_special(tok.eos_id) and not tok.is_special(the)
    assert tok.token_to_str(tok.token_id("<0xE2>")) == "\\xe2"
    gpt2 = gguf_tokenizer(str(testdata / "vocab" / "ggml-vocab-gpt-2.gguf"))
    assert not gpt2.add_bos and gpt2.encode("hi") == gpt2.encode("hi", add_special=False)
    assert gpt2.token_bytes(gpt2.token_id("Ġthe")) == b" the"
    assert gpt2.stop_ids == frozenset({50256})
    with pytest.raises(RequestError):
        tok.decode([tok.vocab_size])


def test_continuation_keeps_the_first_space(testdata: Path) -> None:
    tok = gguf_tokenizer(str(testdata / "models" / "llama-2-tiny-random.gguf"))
    ids = tok.encode("Once upon", add_special=False)
    assert tok.decode(ids) == "Once upon"
    assert tok.decode(ids, continuation=True) == " Once upon"
    assert tok.decode(ids[1:], continuation=True) == " upon"


def spm_metadata(extra_tokens: list[str], **keys: object) -> dict[str, object]:
    tokens = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", *extra_tokens]
    types = [2, 3, 3, 1, 1, 1, 1] + [3] * len(extra_tokens)
    meta: dict[str, object] = {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.scores": [0.0] * len(tokens),
    }
    meta.update({f"tokenizer.ggml.{k}": v for k, v in keys.items()})
    return meta


def test_stop_and_fim_ids_from_token_texts() -> None:
    extra = ["<|im_end|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|endoftext|>"]
    tok = Tokenizer.from_gguf(spm_metadata(extra))
    assert tok.stop_ids == frozenset({2, 7, 11})
    assert tok.fim_ids == (8, 9, 10)
    assert tok.encode("a<|im_end|>", add_special=False) == [6, 7]


def test_stop_and_fim_ids_from_metadata_keys() -> None:
    extra = ["<x_pre>", "<x_suf>", "<x_mid>", "<eot>", "<eom>"]
    meta = spm_metadata(
        extra,
        fim_pre_token_id=7,
        suffix_token_id=8,
        middle_token_id=9,
        eot_token_id=10,
        eom_token_id=11,
        add_eos_token=True,
        add_bos_token=False,
    )
    tok = Tokenizer.from_gguf(meta)
    assert tok.fim_ids == (7, 8, 9)
    assert tok.stop_ids == frozenset({2, 10, 11})
    assert tok.encode("a") == [6, 2]
    partial = Tokenizer.from_gguf(spm_metadata(["<|fim_prefix|>"]))
    assert partial.fim_ids is None


def test_bad_metadata_is_one_clear_error() -> None:
    with pytest.raises(LocalLLMError, match="unsupported tokenizer"):
        Tokenizer.from_gguf({"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": ["a"]})
    with pytest.raises(LocalLLMError, match="merges"):
        Tokenizer.from_gguf({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a"]})


def best_encode_ms(tok: Tokenizer, texts: list[str]) -> float:
    best = float("inf")
    for text in texts:
        t0 = time.perf_counter()
        n = len(tok.encode(text))
        best = min(best, (time.perf_counter() - t0) * 1e3)
        assert 3000 < n < 5500
    return best


def test_encode_4000_tokens_fast(testdata: Path) -> None:
    """Cold cache (new text each run): a 4,000-token prompt must encode well under 100 ms."""
    code = json.loads((testdata / "golden" / "pycode-22m_greedy_f32.json").read_text())[
        "heldout_text"
    ]
    chunks = [code[i * 15000 : (i + 1) * 15000] for i in range(3)]
    spm = Tokenizer.from_gguf(GGUFFile(testdata / "models" / "llama-2-tiny-random.gguf").metadata)
    assert best_encode_ms(spm, [c[:12000] for c in chunks]) < 100
    assert best_encode_ms(llama3_tokenizer(str(testdata)), chunks) < 100
