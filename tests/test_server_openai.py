"""The official `openai` client against a real uvicorn server running stories260K on CPU."""

from __future__ import annotations

import json

import pytest

openai = pytest.importorskip("openai")

from conftest import testdata_path as data_path  # noqa: E402

from localllm.formats.gguf import GGUFFile  # noqa: E402
from localllm.server.background import model_server, wait_ready  # noqa: E402
from localllm.tokenizer import Tokenizer  # noqa: E402

KEY = "sk-test-key"
STORY = "Once upon a time"


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest):
    path = data_path("models", "stories260K.gguf")
    srv = model_server(path, api_key=KEY, device="cpu", max_model_len=256)
    wait_ready(srv)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def tokenizer(server):
    return Tokenizer.from_gguf(GGUFFile(data_path("models", "stories260K.gguf")).metadata)


def test_models_list(client):
    ids = [m.id for m in client.models.list()]
    assert ids == ["stories260K"]
    assert client.models.retrieve("stories260K").id == "stories260K"


def test_completion_matches_golden(client, tokenizer):
    golden = json.loads(data_path("golden", "stories260K_greedy.json").read_text())
    r = client.completions.create(
        model="stories260K", prompt=golden["prompt_tokens"], max_tokens=24, temperature=0
    )
    want = tokenizer.decode(golden["greedy_tokens"][:24], continuation=True)
    assert r.choices[0].text == want
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens == 1 and r.usage.completion_tokens == 24
    assert r.usage.total_tokens == 25


def test_completion_stream_equals_non_stream(client):
    kw = dict(model="stories260K", prompt=STORY, max_tokens=20, temperature=0)
    full = client.completions.create(**kw).choices[0].text
    chunks = list(
        client.completions.create(**kw, stream=True, stream_options={"include_usage": True})
    )
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == full and full.startswith(", there was")
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 20


def test_chat_non_stream_and_stream(client):
    msgs = [
        {"role": "system", "content": "You tell stories."},
        {"role": "user", "content": [{"type": "text", "text": "Tell me a story."}]},
    ]
    r = client.chat.completions.create(
        model="stories260K", messages=msgs, max_tokens=16, temperature=0
    )
    assert r.object == "chat.completion"
    msg = r.choices[0].message
    assert msg.role == "assistant" and msg.content and not msg.content.startswith(" ")
    assert r.usage.completion_tokens <= 16 and r.usage.prompt_tokens > 5
    stream = client.chat.completions.create(
        model="stories260K", messages=msgs, max_tokens=16, temperature=0, stream=True
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == msg.content
    assert chunks[-1].choices[0].finish_reason == r.choices[0].finish_reason
    assert all(c.usage is None for c in chunks)  # no include_usage: no usage chunk


def test_max_completion_tokens_and_default_rest_of_context(client):
    msgs = [{"role": "user", "content": "Hi"}]
    r = client.chat.completions.create(
        model="stories260K", messages=msgs, max_completion_tokens=3, temperature=0
    )
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"
    # no max_tokens: runs to EOS or the end of the 256-token context
    r = client.completions.create(model="stories260K", prompt=STORY, temperature=0)
    assert r.usage.total_tokens <= 256
    assert r.choices[0].finish_reason == ("length" if r.usage.total_tokens == 256 else "stop")


def test_usage_reports_cached_prompt_tokens(client):
    prompt = ("The little dog ran to the park to play with his red ball. " * 4).strip()
    first = client.completions.create(
        model="stories260K", prompt=prompt, max_tokens=2, temperature=0
    )
    second = client.completions.create(
        model="stories260K", prompt=prompt, max_tokens=2, temperature=0
    )
    n = first.usage.prompt_tokens
    assert n > 32
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < n and cached % 16 == 0  # whole 16-token blocks, never the last token
    assert cached >= 16 * ((n - 1) // 16) - 16
    assert second.choices[0].text == first.choices[0].text  # a hit gives the same output


def test_stop_string_spanning_tokens(client):
    base = (
        client.completions.create(model="stories260K", prompt=STORY, max_tokens=20, temperature=0)
        .choices[0]
        .text
    )
    assert "Lily" in base
    for stream in (False, True):
        kw = dict(
            model="stories260K", prompt=STORY, max_tokens=20, temperature=0, stop=["Lily", "zzz"]
        )
        if stream:
            chunks = list(client.completions.create(**kw, stream=True))
            text = "".join(c.choices[0].text for c in chunks)
            reason = chunks[-1].choices[0].finish_reason
        else:
            r = client.completions.create(**kw)
            text, reason = r.choices[0].text, r.choices[0].finish_reason
        assert text == base[: base.index("Lily")]
        assert reason == "stop"


def test_seed_reproducible_and_n_choices(client):
    kw = dict(model="stories260K", prompt=STORY, max_tokens=12, temperature=1.0, seed=1234)
    a = client.completions.create(**kw, n=3)
    b = client.completions.create(**kw, n=3)
    texts = [c.text for c in sorted(a.choices, key=lambda c: c.index)]
    assert [c.index for c in sorted(a.choices, key=lambda c: c.index)] == [0, 1, 2]
    assert texts == [c.text for c in sorted(b.choices, key=lambda c: c.index)]
    assert len(set(texts)) > 1  # seed + i per choice
    singles = [client.completions.create(**{**kw, "seed": 1234 + i}) for i in range(3)]
    assert [s.choices[0].text for s in singles] == texts
    assert a.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)
    assert a.usage.prompt_tokens == singles[0].usage.prompt_tokens  # the prompt counts once


def test_n_choices_stream_interleaved(client):
    msgs = [{"role": "user", "content": "Hello"}]
    kw = dict(model="stories260K", messages=msgs, max_tokens=8, temperature=0.8, seed=7, n=2)
    full = client.chat.completions.create(**kw)
    chunks = list(
        client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True})
    )
    texts = ["", ""]
    for c in chunks:
        for ch in c.choices:
            texts[ch.index] += ch.delta.content or ""
    assert texts == [full.choices[i].message.content for i in range(2)]
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens


def test_chat_logprobs(client, tokenizer):
    r = client.chat.completions.create(
        model="stories260K",
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=5,
        temperature=0,
        logprobs=True,
        top_logprobs=3,
    )
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for item in content:
        assert item.logprob <= 0.0 and len(item.top_logprobs) == 3
        tops = [t.logprob for t in item.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        assert item.logprob == pytest.approx(tops[0], abs=1e-5)  # greedy picks the top token
        assert bytes(item.bytes).decode("utf-8", "backslashreplace") == item.token


def test_completion_logprobs_stream_and_not(client):
    kw = dict(model="stories260K", prompt=STORY, max_tokens=6, temperature=0, logprobs=2)
    r = client.completions.create(**kw)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 6
    assert "".join(lp.tokens) == r.choices[0].text
    assert all(len(t) <= 2 for t in lp.top_logprobs)
    streamed = [
        t
        for c in client.completions.create(**kw, stream=True)
        if c.choices[0].logprobs
        for t in c.choices[0].logprobs.tokens
    ]
    assert streamed == lp.tokens


def test_echo_prepends_prompt(client):
    r = client.completions.create(
        model="stories260K", prompt=STORY, max_tokens=4, temperature=0, echo=True
    )
    assert r.choices[0].text.startswith(STORY + ",")


def test_batch_of_prompts(client):
    r = client.completions.create(
        model="stories260K", prompt=[STORY, "The cat"], max_tokens=4, temperature=0, n=2
    )
    assert sorted(c.index for c in r.choices) == [0, 1, 2, 3]
    by = {c.index: c.text for c in r.choices}
    assert by[0] == by[1] and by[2] == by[3] and by[0] != by[2]
