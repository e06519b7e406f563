"""The fragment cache of `Tokenizer.encode`: a conversation sent again reuses the ids of its
earlier fragments (each message between special tokens), and the ids never change."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from test_tokenizer import (
    VECTOR_FILES,
    gguf_tokenizer,
    llama3_tokenizer,
    read_vectors,
    vector_tokenizer,
)

from localllm.formats.gguf import GGUFFile
from localllm.tokenizer import Tokenizer
from localllm.tokenizer.fragment_cache import FragmentCache


def test_keeps_long_fragments_least_recently_used_first_out() -> None:
    c = FragmentCache(min_chars=4, max_chars=10)
    c.put("abc", False, [1])  # too short to keep
    assert c.get("abc", False) is None and len(c) == 0
    c.put("abcd", False, [1, 2])
    c.put("efgh", True, [3])
    assert list(c.get("abcd", False) or []) == [1, 2] and c.get("abcd", True) is None
    c.put("ijkl", False, [4])  # 12 characters > 10: the least recently used (efgh) goes
    assert c.get("efgh", True) is None
    assert list(c.get("abcd", False) or []) == [1, 2]
    assert list(c.get("ijkl", False) or []) == [4]
    c.put("x" * 11, False, [5])  # longer than the whole budget: not kept
    assert c.get("x" * 11, False) is None
    assert c.hits == 3


def test_threads_share_it() -> None:
    c = FragmentCache(min_chars=1, max_chars=50)
    texts = [f"text{i:02d}" for i in range(40)]

    def work() -> None:
        for _ in range(200):
            for i, t in enumerate(texts):
                c.put(t, False, [i])
                got = c.get(t, False)
                assert got is None or list(got) == [i]

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c._chars <= 50 and c._chars == sum(len(t) for t, _ in c._ids)


@pytest.mark.parametrize("name", VECTOR_FILES)
def test_cached_ids_are_the_engines(testdata: Path, name: str) -> None:
    """Every llama.cpp vector, repeated past the length the cache keeps, encodes the same from
    the cache as the first time, and as llama.cpp's ids repeated would say (checked by a
    tokenizer without the cache)."""
    tok = vector_tokenizer(testdata, name)
    if name == "ggml-vocab-llama-bpe.gguf":
        plain = llama3_tokenizer.__wrapped__(str(testdata))
    else:
        plain = gguf_tokenizer.__wrapped__(str(testdata / "vocab" / name))
    plain._fragments = FragmentCache(min_chars=1 << 30)  # keeps nothing
    hits = tok._fragments.hits
    for text, _ in read_vectors(testdata, name):
        long = text * (1 + 300 // max(len(text), 1))
        first = tok.encode(long, add_special=False)
        assert tok.encode(long, add_special=False) == first == plain.encode(long, add_special=False)
    assert tok._fragments.hits > hits + 20


def test_a_conversation_sent_again(testdata: Path) -> None:
    """A chat's next turn re-sends its earlier messages: their fragments come from the cache,
    and the ids are those of a tokenizer that never saw them."""
    path = testdata / "models" / "stories260K.gguf"
    code = json.loads((testdata / "golden" / "pycode-22m_greedy_f32.json").read_text())
    system = code["heldout_text"][:6000]
    tok = Tokenizer.from_gguf(GGUFFile(path).metadata)
    fresh = Tokenizer.from_gguf(GGUFFile(path).metadata)
    assert tok.eos_id is not None
    eos = tok.token_text(tok.eos_id)  # a special token between messages
    turn1 = f"{system}{eos}question one{eos}"
    turn2 = f"{turn1}an answer{eos}question two{eos}"
    first = tok.encode(turn1)
    assert tok._fragments.hits == 0 and len(tok._fragments) == 1
    second = tok.encode(turn2)
    assert tok._fragments.hits == 1
    assert second == fresh.encode(turn2) and second[: len(first)] == first
