"""What a new user, the OpenAI SDK and a hostile page meet first, against a real server
(stories260K on CPU): README examples verbatim, any model name, refused unimplemented fields,
lone surrogates on a kept-alive connection, Host/Origin/content-type checks, sampling
extremes, a 10 MB prompt while /health stays quick, a client that hangs up."""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time

import httpx
import pytest
from conftest import testdata_path as data_path

from localllm.server.background import model_server, wait_ready

openai = pytest.importorskip("openai")
CTX = 128


@pytest.fixture(scope="module")
def server():
    srv = model_server(data_path("models", "stories260K.gguf"), device="cpu", max_model_len=CTX)
    wait_ready(srv)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def http_client(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


class TracebackCounter(logging.Handler):
    """Counts log records that carry a traceback (uvicorn's and ours)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.records.append(record)


@pytest.fixture
def tracebacks():
    counter = TracebackCounter()
    loggers = [logging.getLogger(n) for n in ("uvicorn.error", "uvicorn", "localllm")]
    for lg in loggers:
        lg.addHandler(counter)
    yield counter.records
    for lg in loggers:
        lg.removeHandler(counter)


def test_readme_examples_verbatim(server, http_client):
    # the curl example: `"model": "local"` with a JSON content type, streamed
    body = {"model": "local", "messages": [{"role": "user", "content": "Hello!"}], "stream": True}
    with http_client.stream(
        "POST",
        "/v1/chat/completions",
        headers={"Content-Type": "application/json"},
        content=json.dumps(body),
    ) as r:
        assert r.status_code == 200
        lines = [x for x in r.iter_lines() if x]
    assert lines[-1] == "data: [DONE]"
    assert json.loads(lines[0][6:])["model"] == "stories260K"  # the served name
    # the Python example
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
    out = client.chat.completions.create(
        model="local", messages=[{"role": "user", "content": "Hi"}]
    )
    assert isinstance(out.choices[0].message.content, str) and out.model == "stories260K"


def test_strict_model_name_keeps_404():
    srv = model_server(
        data_path("models", "stories260K.gguf"),
        server={"strict_model_name": True},
        device="cpu",
        max_model_len=64,
    )
    try:
        wait_ready(srv)
        r = httpx.post(srv.url + "/v1/completions", json={"model": "gpt-4o", "prompt": "x"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
        ok = {"model": "stories260K.gguf", "prompt": "x", "max_tokens": 1}
        assert httpx.post(srv.url + "/v1/completions", json=ok).status_code == 200
    finally:
        srv.stop()


UNSUPPORTED = [  # (extra fields, param named in the 400)
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format"),
    ({"tool_choice": "required"}, "tool_choice"),  # without tools
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"logit_bias": {"50": 10}}, "logit_bias"),
    ({"typical_p": 0.5}, "typical_p"),
    ({"mirostat": 2}, "mirostat"),
    ({"repeat_penalty": 1.2, "repeat_last_n": 64}, "repeat_last_n"),
    ({"frobnicate": True}, "frobnicate"),
]


@pytest.mark.parametrize("extra,param", UNSUPPORTED)
def test_unimplemented_fields_get_400_naming_them(http_client, extra, param):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **extra}
    r = http_client.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and param in err["message"]
    r = http_client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2, **extra})
    assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_unimplemented_fields_through_the_openai_client(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="local",
            messages=[{"role": "user", "content": "hi"}],
            logit_bias={"50": 10},
        )
    assert "logit_bias" in str(e.value)


def test_tools_are_a_chat_feature(http_client):
    tools = [{"type": "function", "function": {"name": "f"}}]
    r = http_client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2, "tools": tools})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools"
    assert "/v1/chat/completions" in r.json()["error"]["message"]


SURROGATE_BODIES = [  # (path, raw JSON with a lone surrogate, param)
    (
        "/v1/chat/completions",
        '{"messages":[{"role":"user","content":"a\\ud800"}]}',
        "messages[0].content",
    ),
    ("/v1/chat/completions", '{"messages":[{"role":"\\ud800","content":"a"}]}', "messages[0].role"),
    (
        "/v1/chat/completions",
        '{"model":"\\udfff","messages":[{"role":"user","content":"a"}]}',
        "model",
    ),
    (
        "/v1/chat/completions",
        '{"stream":true,"messages":[{"role":"user","content":"\\ud800"}]}',
        "messages[0].content",
    ),
    ("/v1/completions", '{"prompt":"\\ud800"}', "prompt"),
    ("/v1/completions", '{"prompt":"a","stop":["\\ud800"]}', "stop[0]"),
    ("/v1/completions", '{"prompt":["ok","\\ud83d"]}', "prompt[1]"),
    ("/tokenize", '{"content":"\\ud800"}', "content"),
    ("/infill", '{"input_prefix":"\\ud800"}', "input_prefix"),
    ("/completion", '{"prompt":"\\ud800","stream":true}', "prompt"),
    (
        "/api/chat",
        '{"model":"m","messages":[{"role":"user","content":"\\ud800"}]}',
        "messages[0].content",
    ),
    (
        "/api/generate",
        '{"model":"m","prompt":"x","options":{"stop":["\\ud800"]}}',
        "options.stop[0]",
    ),
]


def test_lone_surrogates_are_400_and_keep_the_connection(server):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.connect()
    sock = conn.sock
    headers = {"Content-Type": "application/json"}
    for path, raw, param in SURROGATE_BODIES:
        conn.request("POST", path, body=raw.encode(), headers=headers)
        resp = conn.getresponse()
        body = json.loads(resp.read())
        assert resp.status == 400, (path, body)
        message = body["error"] if path.startswith("/api/") else body["error"]["message"]
        assert param in message, (path, body)
        if not path.startswith("/api/"):
            assert body["error"]["param"] == param
        assert not resp.will_close and conn.sock is sock  # the same kept-alive connection
    conn.request("GET", "/health")
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read()) == {"status": "ok"}
    assert conn.sock is sock
    conn.close()


def test_host_origin_and_content_type_checks(http_client):
    ok = {"prompt": "x", "max_tokens": 1}
    for host in ("evil.example", "attacker.com:8000", "localhost.evil.com"):
        r = http_client.post("/v1/completions", json=ok, headers={"Host": host})
        assert r.status_code == 403 and r.json()["error"]["code"] == "host_not_allowed"
    for host in ("localhost:8000", "127.0.0.1", "[::1]:8000", "LOCALHOST", "app.localhost"):
        assert (
            http_client.post("/v1/completions", json=ok, headers={"Host": host}).status_code == 200
        )
    r = http_client.post("/v1/completions", json=ok, headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"
    r = http_client.get("/v1/models", headers={"Origin": "null"})
    assert r.status_code == 403
    for origin in ("http://localhost:3000", "vscode-webview://abc"):
        r = http_client.post("/v1/completions", json=ok, headers={"Origin": origin})
        assert r.status_code == 200
    # what a page can send cross-site without a preflight
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
        headers = {"Content-Type": ctype} if ctype else {}
        r = http_client.post("/v1/completions", content=json.dumps(ok), headers=headers)
        assert ctype is not None or "content-type" not in r.request.headers
        assert r.status_code == 415, (ctype, r.text)
        assert r.json()["error"]["code"] == "unsupported_media_type"
    r = http_client.post("/api/chat", content="{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and "application/json" in r.json()["error"]


def test_allowed_host_option():
    srv = model_server(
        data_path("models", "stories260K.gguf"),
        server={"allowed_hosts": ("gpu-box.lan",)},
        device="cpu",
        max_model_len=64,
    )
    try:
        wait_ready(srv)
        assert (
            httpx.get(srv.url + "/v1/models", headers={"Host": "gpu-box.lan:8000"}).status_code
            == 200
        )
        assert httpx.get(srv.url + "/v1/models", headers={"Host": "other.lan"}).status_code == 403
    finally:
        srv.stop()


@pytest.mark.parametrize(
    "extreme", [{"temperature": 1e-38}, {"temperature": 1e-45}, {"top_p": 1e-46}, {"top_p": 5e-324}]
)
def test_sampling_extremes_keep_the_most_likely_token(http_client, extreme):
    greedy = http_client.post(
        "/v1/completions", json={"prompt": "Once upon", "max_tokens": 8, "temperature": 0}
    ).json()["choices"][0]["text"]
    r = http_client.post(
        "/v1/completions", json={"prompt": "Once upon", "max_tokens": 8, **extreme}
    )
    assert r.status_code == 200
    assert r.json()["choices"][0]["text"] == greedy and "<unk>" not in greedy


@pytest.mark.parametrize(
    "field,value",
    [
        ("repetition_penalty", 1e-300),
        ("repetition_penalty", 0.0),
        ("repetition_penalty", 11.0),
        ("temperature", -1e-9),
        ("temperature", 2.5),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("min_p", -0.1),
    ],
)
def test_sampling_out_of_range_is_400(http_client, field, value):
    r = http_client.post("/v1/completions", json={"prompt": "x", field: value})
    assert r.status_code == 400 and r.json()["error"]["param"] == field


def test_huge_prompt_is_refused_fast_while_health_answers(server, http_client):
    big = "Once upon a time " * (10 * 1024 * 1024 // 17)  # 10 MB
    result: dict[str, object] = {}

    def post() -> None:
        t0 = time.perf_counter()
        r = httpx.post(server.url + "/v1/completions", json={"prompt": big}, timeout=60)
        result["status"], result["seconds"] = r.status_code, time.perf_counter() - t0
        result["code"] = r.json()["error"]["code"]

    worker = threading.Thread(target=post)
    worker.start()
    worst = 0.0
    while worker.is_alive():
        t0 = time.perf_counter()
        assert http_client.get("/health").status_code == 200
        worst = max(worst, time.perf_counter() - t0)
        time.sleep(0.01)
    worker.join()
    assert result["status"] == 400 and result["code"] == "context_length_exceeded"
    assert result["seconds"] < 5.0
    assert worst < 1.0  # /health never waits on the big request


def test_non_streaming_client_hanging_up_logs_no_traceback(server, http_client, tracebacks):
    body = {"prompt": "Once", "max_tokens": 120, "temperature": 0, "ignore_eos": True}
    # 120 tokens take 60+ ms on the fastest CPU seen here (0.2 s could pass on a fast machine)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/v1/completions", json=body, timeout=httpx.Timeout(5, read=0.03))
    deadline = time.monotonic() + 10
    while http_client.get("/stats").json()["running"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.2)
    assert not tracebacks, [r.getMessage() for r in tracebacks]
