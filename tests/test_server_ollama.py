"""Ollama's API (driven by the official `ollama` client) and llama.cpp's native /completion
and /props, served from the same engine as the OpenAI routes (stories260K, CPU)."""

from __future__ import annotations

import json

import httpx
import pytest
from conftest import testdata_path as data_path

from localllm.server.background import model_server, wait_ready

ollama = pytest.importorskip("ollama")
CTX = 128


@pytest.fixture(scope="module")
def server():
    srv = model_server(data_path("models", "stories260K.gguf"), device="cpu", max_model_len=CTX)
    wait_ready(srv)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server):
    return ollama.Client(host=server.url)


GREEDY = {"temperature": 0, "num_predict": 8}


def test_tags_show_ps_version(server, client):
    models = client.list().models
    assert len(models) == 1 and models[0].model == "stories260K:latest"
    assert models[0].details.format == "gguf" and models[0].details.family == "llama"
    assert models[0].size > 0 and len(models[0].digest) == 64
    shown = client.show("stories260K")
    assert shown.modelinfo["llama.context_length"] == CTX
    assert shown.modelinfo["general.parameter_count"] > 200_000
    assert "completion" in shown.capabilities and shown.details.quantization_level
    running = client.ps().models
    assert running[0].context_length == CTX and running[0].name == "stories260K:latest"
    assert httpx.get(server.url + "/api/version").json()["version"]


def test_chat_stream_and_not(client):
    msgs = [{"role": "user", "content": "Tell me a story"}]
    whole = client.chat(model="stories260K:latest", messages=msgs, stream=False, options=GREEDY)
    assert whole.done and whole.done_reason == "length" and whole.eval_count == 8
    assert whole.message.role == "assistant" and whole.model == "stories260K:latest"
    assert whole.prompt_eval_count > 0 and whole.total_duration > 0
    parts = list(client.chat(model="anything", messages=msgs, stream=True, options=GREEDY))
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert parts[-1].eval_count == 8


def test_generate_stream_raw_context_and_options(client):
    out = client.generate(model="stories260K", prompt="Once upon a time", raw=True, options=GREEDY)
    assert out.done and out.eval_count == 8 and out.response
    streamed = "".join(
        p.response
        for p in client.generate(
            model="stories260K", prompt="Once upon a time", raw=True, options=GREEDY, stream=True
        )
    )
    assert streamed == out.response
    chat = client.generate(model="stories260K", prompt="Hi", system="Be brief", options=GREEDY)
    assert chat.context and len(chat.context) == chat.prompt_eval_count + chat.eval_count
    follow = client.generate(
        model="stories260K", prompt="More", context=chat.context, options=GREEDY
    )
    assert follow.prompt_eval_count > len(chat.context)
    seeded = [
        client.generate(
            model="m",
            prompt="Once",
            raw=True,
            options={"seed": 7, "temperature": 1, "num_predict": 6},
        ).response
        for _ in range(2)
    ]
    assert seeded[0] == seeded[1]
    stop = client.generate(
        model="m", prompt="Once", raw=True, options={**GREEDY, "num_predict": 40, "stop": ["."]}
    )
    assert "." not in stop.response
    loaded = client.generate(model="stories260K", prompt="")
    assert loaded.done and loaded.done_reason == "load"


def test_ollama_options_refused_or_checked(client):
    for options, name in (
        ({"mirostat": 2}, "mirostat"),
        ({"num_thread": 8}, "num_thread"),
        ({"num_ctx": 100_000}, "num_ctx"),
        ({"typical_p": 0.7}, "typical_p"),
    ):
        with pytest.raises(ollama.ResponseError) as e:
            client.generate(model="m", prompt="x", options=options)
        assert e.value.status_code == 400 and name in e.value.error
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    answer = client.chat(model="m", messages=[{"role": "user", "content": "x"}], format=schema)
    assert json.loads(answer.message.content)["ok"] in (True, False)  # format: a JSON schema
    out = client.generate(
        model="m", prompt="x", raw=True, options={"num_ctx": 64, "num_predict": -1}
    )
    assert out.prompt_eval_count + out.eval_count <= 64
    ok = client.generate(model="m", prompt="x", options={**GREEDY, "typical_p": 1.0, "mirostat": 0})
    assert ok.done


def test_llamacpp_completion_and_props(server):
    url = server.url
    body = {"prompt": "Once upon a time", "n_predict": 8, "temperature": 0, "cache_prompt": True}
    whole = httpx.post(url + "/completion", json=body).json()
    assert whole["stop"] is True and whole["tokens_predicted"] == 8 and whole["content"]
    tokens = httpx.post(
        url + "/tokenize", json={"content": "Once upon a time", "add_special": True}
    )
    same = httpx.post(url + "/completion", json={**body, "prompt": tokens.json()["tokens"]}).json()
    assert same["content"] == whole["content"]
    with httpx.stream("POST", url + "/completion", json={**body, "stream": True}) as r:
        events = [json.loads(x[6:]) for x in r.iter_lines() if x.startswith("data: ")]
    assert "".join(e["content"] for e in events) == whole["content"] and events[-1]["stop"]
    probs = httpx.post(url + "/completion", json={**body, "n_probs": 3}).json()
    first = probs["completion_probabilities"][0]
    assert len(probs["completion_probabilities"]) == 8 and len(first["top_logprobs"]) == 3
    assert first["top_logprobs"][0]["logprob"] >= first["top_logprobs"][1]["logprob"]
    picked = httpx.post(
        url + "/completion", json={**body, "response_fields": ["content", "timings/predicted_n"]}
    ).json()
    assert picked == {"content": whole["content"], "timings/predicted_n": 8}
    props = httpx.get(url + "/props").json()
    assert props["default_generation_settings"]["n_ctx"] == CTX
    assert props["model_alias"] == "stories260K"


def test_completion_predict_time_limit_stops_after_a_newline(server):
    body = {
        "prompt": "Once upon a time",
        "n_predict": 110,
        "temperature": 0,
        "ignore_eos": True,
        "t_max_predict_ms": 1,
    }
    full = httpx.post(server.url + "/completion", json={**body, "t_max_predict_ms": -1}).json()
    assert "\n" in full["content"]  # stories260K writes a newline early in this story
    cut = httpx.post(server.url + "/completion", json=body).json()
    assert cut["stop_type"] == "limit" and cut["tokens_predicted"] < full["tokens_predicted"]
    assert "\n" in cut["content"] and full["content"].startswith(cut["content"])
    assert len(cut["content"]) - cut["content"].index("\n") <= 8  # right after the newline
