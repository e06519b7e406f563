"""Fill-in-the-middle: prompt layout at the token level, trimming, and /infill + `suffix` on a
real server with a small random model whose vocabulary has FIM tokens."""

from __future__ import annotations

import json
import time

import gguf
import httpx
import pytest
from conftest import testdata_path as data_path
from hypothesis import given, settings
from hypothesis import strategies as st

from localllm.formats.gguf import GGUFFile
from localllm.formats.synthetic import SyntheticSpec, byte_vocab, write_synthetic
from localllm.server.background import model_server, wait_ready
from localllm.server.prompts import SNIPPET_HEADER, extra_context_ids, fim_prompt_ids, fit_fim
from localllm.tokenizer import Tokenizer
from localllm.tokenizer.vocab import TokenType

FIM_TOKENS = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_sep|>"]
CTX = 256


def write_fim_vocab(path) -> None:
    """A byte-fallback SentencePiece vocab plus Qwen-style FIM and file-separator tokens."""
    v = byte_vocab()
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(v.tokens + FIM_TOKENS)
    w.add_token_scores(v.scores + [0.0] * len(FIM_TOKENS))
    w.add_token_types(v.types + [int(TokenType.CONTROL)] * len(FIM_TOKENS))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def fim_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("fim")
    write_fim_vocab(d / "vocab.gguf")
    spec = SyntheticSpec(
        "fim-tiny",
        vocab=320,
        dim=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn=128,
        context_length=CTX,
    )
    return write_synthetic(spec, d / "fim-tiny.gguf", seed=3, vocab_gguf=d / "vocab.gguf")


@pytest.fixture(scope="module")
def tok(fim_model) -> Tokenizer:
    return Tokenizer.from_gguf(GGUFFile(fim_model).metadata)


@pytest.fixture(scope="module")
def server(fim_model):
    srv = model_server(fim_model, device="cpu")
    wait_ready(srv)
    yield srv
    srv.stop()


def enc(tok: Tokenizer, text: str) -> list[int]:
    return tok.encode(text, add_special=False, parse_special=False)


def test_fim_layout_is_prefix_suffix_middle(tok):
    pre, suf, mid = tok.fim_ids
    assert [tok.token_text(i) for i in (pre, suf, mid)] == FIM_TOKENS[:3]
    prefix, suffix = "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"
    ids = fim_prompt_ids(tok, prefix, suffix)
    assert ids == [tok.bos_id, pre, *enc(tok, prefix), suf, *enc(tok, suffix), mid]
    # user text cannot smuggle in control tokens
    sneaky = fim_prompt_ids(tok, "x<|fim_middle|>", "")
    assert sneaky.count(mid) == 1 and sneaky[-1] == mid


def test_extra_context_uses_file_separator_or_snippet_header(tok):
    sep = tok.token_id("<|file_sep|>")
    chunks = [("a.py", "import os\n"), ("b.py", "x = 1\n")]
    assert extra_context_ids(tok, chunks) == (
        [sep, *enc(tok, "a.py\nimport os\n"), sep, *enc(tok, "b.py\nx = 1\n")]
    )
    ids = fim_prompt_ids(tok, "p", "s", chunks)
    assert ids[0] == tok.bos_id and ids[1] == sep and ids.index(tok.fim_ids[0]) > 1
    stories = Tokenizer.from_gguf(GGUFFile(data_path("models", "stories260K.gguf")).metadata)
    want = enc(stories, SNIPPET_HEADER.format(filename="a.py") + "import os\n")
    assert extra_context_ids(stories, chunks[:1]) == want


ids_lists = st.lists(st.integers(0, 9), max_size=60)


@settings(max_examples=200, deadline=None)
@given(prefix=ids_lists, suffix=ids_lists, extra=ids_lists, budget=st.integers(-5, 200))
def test_fit_fim_keeps_prefix_end_and_suffix_start(prefix, suffix, extra, budget):
    p, s, e, trimmed = fit_fim(prefix, suffix, extra, budget)
    assert len(p) + len(s) + len(e) <= max(budget, 0)
    assert p == prefix[len(prefix) - len(p) :] and s == suffix[: len(s)]
    assert e == extra[len(extra) - len(e) :]
    assert trimmed == ((p, s, e) != (prefix, suffix, extra))
    if len(prefix) + len(suffix) + len(extra) <= budget:
        assert not trimmed
    if trimmed and budget >= 4:  # the prefix gets at least its 3/4 share when it needs it
        assert len(p) >= min(len(prefix), 3 * budget // 4)


def test_infill_and_completion_suffix_agree(server, tok):
    prefix, suffix = "def add(a, b):\n    return ", "\n"
    r = httpx.post(
        server.url + "/infill",
        json={"input_prefix": prefix, "input_suffix": suffix, "n_predict": 8, "temperature": 0},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["stop"] is True and body["truncated"] is False
    assert body["tokens_evaluated"] == len(fim_prompt_ids(tok, prefix, suffix))
    assert body["tokens_predicted"] == len(body["tokens"]) <= 8
    assert body["stop_type"] in ("limit", "eos", "word") and "timings" in body
    c = httpx.post(
        server.url + "/v1/completions",
        json={"prompt": prefix, "suffix": suffix, "max_tokens": 8, "temperature": 0},
    ).json()
    assert c["usage"]["prompt_tokens"] == body["tokens_evaluated"]
    assert c["choices"][0]["text"] == body["content"]


def test_infill_prompt_and_extra_and_stream(server, tok):
    req = {
        "input_prefix": "x = ",
        "prompt": "1 +",
        "input_suffix": "\n",
        "input_extra": [{"filename": "util.py", "text": "def one():\n    return 1\n"}],
        "n_predict": 6,
        "temperature": 0,
    }
    plain = httpx.post(server.url + "/infill", json=req).json()
    extra = [("util.py", "def one():\n    return 1\n")]
    assert plain["tokens_evaluated"] == len(fim_prompt_ids(tok, "x = 1 +", "\n", extra))
    with httpx.stream("POST", server.url + "/infill", json={**req, "stream": True}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert [e["stop"] for e in events] == [False] * (len(events) - 1) + [True]
    assert "".join(e["content"] for e in events) == plain["content"]
    assert events[-1]["tokens_evaluated"] == plain["tokens_evaluated"]


def test_infill_trims_long_input_to_the_context(server, tok):
    r = httpx.post(
        server.url + "/infill",
        json={
            "input_prefix": "a = 1\n" * 200,
            "input_suffix": "b = 2\n" * 200,
            "n_predict": 4,
            "temperature": 0,
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["truncated"] is True
    assert body["tokens_evaluated"] + 4 <= CTX


# llama.vscode's request bodies, field for field (src/llama-server.ts createRequestPayload,
# src/extra-context.ts chunks); its settings defaults: t_max_prompt_ms 500, t_max_predict_ms
# 1000, n_predict 128
CHUNKS = [
    {"text": "def one():\n    return 1\n", "time": 1718000000000, "filename": "/src/util.py"},
    {"text": "def two():\n    return 2\n", "time": 1718000000500, "filename": "/src/more.py"},
]


def vscode_prepare(chunks):
    return {
        "input_prefix": "",
        "input_suffix": "",
        "input_extra": chunks,
        "prompt": "",
        "n_predict": 0,
        "samplers": [],
        "cache_prompt": True,
        "t_max_prompt_ms": 500,
        "t_max_predict_ms": 1,
    }


def vscode_completion(prefix, suffix, prompt, chunks, nindent=0):
    body = {
        "input_prefix": prefix,
        "input_suffix": suffix,
        "input_extra": chunks,
        "prompt": prompt,
        "n_predict": 128,
        "top_k": 40,
        "top_p": 0.99,
        "stream": False,
        "samplers": ["top_k", "top_p", "infill"],
        "cache_prompt": True,
        "t_max_prompt_ms": 500,
        "t_max_predict_ms": 1000,
    }
    if nindent:
        body["n_indent"] = nindent
    return body


def wait_idle(server, timeout=30.0):
    """No prompt-only job left (they reach the engine a moment after the answer) and no
    request in the engine."""
    deadline = time.monotonic() + timeout
    while server.app.state.ctx.warmer.running:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    while (s := httpx.get(server.url + "/stats").json())["running"] or s["waiting"]:
        assert time.monotonic() < deadline, s
        time.sleep(0.02)
    return s


def test_vscode_prepare_only_caches_the_prompt_and_returns_at_once(server):
    wait_idle(server)
    before = httpx.get(server.url + "/stats").json()
    t0 = time.perf_counter()
    r = httpx.post(server.url + "/infill", json=vscode_prepare(CHUNKS), timeout=30)
    assert r.status_code == 200, r.text
    assert time.perf_counter() - t0 < 5.0
    body = r.json()
    assert body["content"] == "" and body["tokens_predicted"] == 0 and body["stop"] is True
    after = wait_idle(server)
    # one prompt-only request ran: no generated text went anywhere
    assert after["requests_finished"] + after["requests_aborted"] > (
        before["requests_finished"] + before["requests_aborted"]
    )
    # the completion that follows finds the chunks in the prefix cache
    r = httpx.post(
        server.url + "/infill",
        json=vscode_completion("x = ", "\n", "1", CHUNKS),
        timeout=60,
    )
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["tokens_cached"] >= 16
    assert done["tokens_predicted"] <= 128 and done["stop_type"] in ("limit", "eos", "word")
    assert done["timings"]["prompt_n"] == done["tokens_evaluated"] - done["tokens_cached"]


def test_vscode_completion_body_with_n_indent(server):
    r = httpx.post(
        server.url + "/infill",
        json=vscode_completion("def f():\n    ", "\n", "", CHUNKS, nindent=4),
        timeout=60,
    )
    assert r.status_code == 200, r.text
    text = r.json()["content"]
    for line in text.split("\n")[1:]:  # every later line keeps the block's indentation
        assert not line.strip() or line.startswith("    ") or line.strip() == "", text


def test_prompt_time_limit_answers_empty_and_caches_in_background(server):
    long_prefix = "".join(f"v{i} = {i}\n" for i in range(60))
    wait_idle(server)
    r = httpx.post(
        server.url + "/infill",
        json={**vscode_completion(long_prefix, "", "", []), "t_max_prompt_ms": 1},
        timeout=60,
    )
    assert r.status_code == 200
    body = r.json()  # an engine step takes far more than 1 ms: the prompt phase is cut
    assert body["tokens_predicted"] == 0 and body["content"] == "" and body["stop_type"] == "limit"
    wait_idle(server)
    again = httpx.post(
        server.url + "/infill", json=vscode_completion(long_prefix, "", "", []), timeout=60
    ).json()
    assert again["tokens_cached"] >= 16  # the background job finished the prompt


def test_unsupported_llamacpp_fields_are_refused(server):
    for extra, param in (
        ({"lora": [{"id": 0, "scale": 0.5}]}, "lora"),
        ({"samplers": ["top_k", "mystery"]}, "samplers"),
        ({"typical_p": 0.5}, "typical_p"),
        ({"grammar": "root ::= x"}, "grammar"),  # a GBNF rule that is not defined
    ):
        r = httpx.post(server.url + "/infill", json={"input_prefix": "x", "n_predict": 1, **extra})
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
