"""Structured output over HTTP with the official `openai` client, stories260K on CPU (a model
that knows no JSON): json_schema answers parse and validate, streamed or not, n > 1, under
16 concurrent requests mixed with free ones; llama.cpp's grammar / json_schema fields; bad
schemas and grammars are 400s that name the problem."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import jsonschema
import pytest
from structured_schemas import SCHEMAS

openai = pytest.importorskip("openai")

from conftest import testdata_path as data_path  # noqa: E402

from localllm.server.background import model_server, wait_ready  # noqa: E402

MESSAGES = [{"role": "user", "content": "Tell me about a cat."}]
MODEL = "stories260K"


@pytest.fixture(scope="module")
def server():
    srv = model_server(data_path("models", "stories260K.gguf"), device="cpu", max_model_len=512)
    wait_ready(srv)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=120)


def schema_format(schema: dict, strict: bool = False) -> dict:
    return {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": strict},
    }


def chat_json(client, schema: dict, **kw):
    return client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=200, response_format=schema_format(schema), **kw
    )


def test_schema_suite_concurrently_with_free_requests(client) -> None:
    def constrained(k: int) -> tuple[dict, str, str]:
        r = chat_json(client, SCHEMAS[k], temperature=0.0 if k % 2 else 0.9, seed=k)
        return SCHEMAS[k], r.choices[0].message.content, r.choices[0].finish_reason

    def free(k: int) -> str:
        r = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=24, seed=k)
        return r.choices[0].message.content

    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(constrained, k) for k in range(len(SCHEMAS))]
        frees = [pool.submit(free, k) for k in range(8)]
        results = [f.result() for f in futures]
        assert all(isinstance(f.result(), str) for f in frees)
    for schema, content, reason in results:
        assert reason == "stop", content
        jsonschema.validate(json.loads(content), schema)


def test_schema_suite_streamed(client) -> None:
    def streamed(k: int) -> tuple[dict, str, list[str | None]]:
        chunks = chat_json(client, SCHEMAS[k], temperature=0.8, seed=100 + k, stream=True)
        parts, reasons = [], []
        for c in chunks:
            if c.choices:
                parts.append(c.choices[0].delta.content or "")
                reasons.append(c.choices[0].finish_reason)
        return SCHEMAS[k], "".join(parts), reasons

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(streamed, range(len(SCHEMAS))))
    for schema, content, reasons in results:
        assert reasons[-1] == "stop"
        jsonschema.validate(json.loads(content), schema)


def test_n_choices_each_follow_the_schema(client) -> None:
    schema = SCHEMAS[17]
    r = chat_json(client, schema, n=3, temperature=1.0, seed=7)
    assert len(r.choices) == 3
    for choice in r.choices:
        jsonschema.validate(json.loads(choice.message.content), schema)
    chunks = list(chat_json(client, schema, n=3, temperature=1.0, seed=8, stream=True))
    texts = ["", "", ""]
    for c in chunks:
        for ch in c.choices:
            texts[ch.index] += ch.delta.content or ""
    for text in texts:
        jsonschema.validate(json.loads(text), schema)


def test_json_object_and_completions_endpoint(client) -> None:
    r = client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=300,
        response_format={"type": "json_object"},
        temperature=0.0,
    )
    content = r.choices[0].message.content
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(content), dict)
    else:  # a free-form object may run out of tokens; what there is must be a JSON prefix
        assert content.startswith("{")
    schema = SCHEMAS[15]
    c = client.completions.create(
        model=MODEL,
        prompt="Once upon a time",
        max_tokens=200,
        temperature=0.5,
        seed=3,
        extra_body={"response_format": schema_format(schema)},
    )
    jsonschema.validate(json.loads(c.choices[0].text), schema)


def test_llama_cpp_grammar_and_json_schema_fields(server) -> None:
    gbnf = 'root ::= "The " animal " is " ("big" | "small") "."\nanimal ::= "cat" | "dog"'
    body = {"prompt": "Once", "max_tokens": 30, "grammar": gbnf}
    r = httpx.post(server.url + "/v1/completions", json=body, timeout=60).json()
    assert r["choices"][0]["text"] in {
        f"The {a} is {s}." for a in ("cat", "dog") for s in ("big", "small")
    }
    schema = SCHEMAS[1]
    body = {"messages": MESSAGES, "max_tokens": 50, "json_schema": schema}
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60).json()
    jsonschema.validate(json.loads(r["choices"][0]["message"]["content"]), schema)


@pytest.mark.parametrize(
    "extra, words",
    [
        ({"response_format": schema_format({"type": "strnig"})}, ["response_format", "strnig"]),
        (
            {"response_format": schema_format({"type": "array", "uniqueItems": True})},
            ["uniqueItems"],
        ),
        ({"response_format": schema_format({"not": {"type": "null"}})}, ["not"]),
        (
            {"response_format": schema_format({"type": "object", "properties": {"a": {}}}, True)},
            ["strict", "additionalProperties"],
        ),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, ["schema"]),
        ({"grammar": 'root ::= "a" missing'}, ["grammar", "missing"]),
        ({"grammar": "root ::= [a-"}, ["grammar"]),
        ({"json_schema": {"$ref": "#/$defs/nowhere"}}, ["json_schema", "nowhere"]),
        ({"grammar": 'root ::= "a"', "json_schema": {}}, ["cannot be combined"]),
        ({"response_format": {"type": "yaml"}}, ["response_format"]),
    ],
)
def test_bad_schemas_and_grammars_are_400s_naming_the_problem(server, extra, words) -> None:
    body = {"messages": MESSAGES, "max_tokens": 8, **extra}
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    text = f"{err['message']} {err.get('param')}"
    for word in words:
        assert word in text, err
    assert httpx.get(server.url + "/health", timeout=10).status_code == 200  # still serving


def test_llama_cpp_and_ollama_routes(server) -> None:
    schema = SCHEMAS[8]
    body = {"prompt": "Once", "n_predict": 120, "json_schema": schema, "temperature": 0.7}
    r = httpx.post(server.url + "/completion", json=body, timeout=60).json()
    jsonschema.validate(json.loads(r["content"]), schema)
    body = {"prompt": "Once", "n_predict": 20, "grammar": 'root ::= "yes" | "no"'}
    assert httpx.post(server.url + "/completion", json=body, timeout=60).json()["content"] in (
        "yes",
        "no",
    )
    body = {"model": MODEL, "prompt": "A cat", "stream": False, "format": schema}
    r = httpx.post(server.url + "/api/generate", json=body, timeout=60).json()
    jsonschema.validate(json.loads(r["response"]), schema)
    body = {
        "model": MODEL,
        "messages": MESSAGES,
        "stream": False,
        "format": "json",
        "options": {"num_predict": 300, "temperature": 0},
    }
    r = httpx.post(server.url + "/api/chat", json=body, timeout=60).json()
    if r["done_reason"] == "stop":
        assert isinstance(json.loads(r["message"]["content"]), dict)
    bad = {"model": MODEL, "prompt": "x", "stream": False, "format": "yaml"}
    r = httpx.post(server.url + "/api/generate", json=bad, timeout=60)
    assert r.status_code == 400 and "format" in r.text
