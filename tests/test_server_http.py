"""Plain-HTTP routes and every error path of a real uvicorn server (stories260K, CPU)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from conftest import testdata_path as data_path
from conftest import wait_for_health

from localllm.config import EngineConfig
from localllm.engine.async_engine import AsyncEngine
from localllm.server import ServerSettings, create_app
from localllm.server.background import BackgroundServer, model_server, wait_ready

KEY = "sk-http-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def server():
    srv = model_server(
        data_path("models", "stories260K.gguf"), api_key=KEY, device="cpu", max_model_len=128
    )
    wait_ready(srv)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as c:
        yield c


def assert_error(
    r: httpx.Response, status: int, code: str | None = None, param: str | None = None
) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    if code is not None:
        assert err["code"] == code
    if param is not None:
        assert err["param"] == param
    return err


def still_serving(http: httpx.Client) -> None:
    r = http.post("/v1/completions", json={"prompt": "Once", "max_tokens": 2, "temperature": 0})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2


def test_health_loading_then_ok():
    gate = threading.Event()
    cfg = EngineConfig(
        model=str(data_path("models", "stories260K.gguf")), device="cpu", max_model_len=64
    )

    def slow_load() -> AsyncEngine:
        gate.wait(30)
        return AsyncEngine.from_config(cfg)

    app = create_app(ServerSettings("stories260K"), slow_load)
    with BackgroundServer(app) as srv:
        r = httpx.get(srv.url + "/health")
        assert r.status_code == 503 and r.json() == {"status": "loading"}
        r = httpx.post(srv.url + "/v1/completions", json={"prompt": "Once"})
        assert_error(r, 503, "model_loading")
        assert_error(httpx.get(srv.url + "/v1/models"), 503)
        gate.set()
        deadline = time.monotonic() + 30
        while (r := httpx.get(srv.url + "/health")).status_code == 503:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        assert httpx.get(srv.url + "/v1/models").status_code == 200


def test_health_reports_a_failed_load():
    def broken() -> AsyncEngine:
        raise RuntimeError("no such file")

    with BackgroundServer(create_app(ServerSettings("x"), broken)) as srv:
        srv.app.state.ctx.holder.wait(10)
        r = httpx.get(srv.url + "/health")
        assert r.status_code == 503 and r.json()["status"] == "error"
        assert "no such file" in r.json()["error"]
        assert_error(httpx.get(srv.url + "/v1/models"), 503, "model_load_failed")


def test_api_key(server, http):
    assert httpx.get(server.url + "/health").status_code == 200  # open
    r = httpx.get(server.url + "/v1/models")
    assert_error(r, 401, "invalid_api_key")
    assert r.headers["www-authenticate"] == "Bearer"
    r = httpx.post(
        server.url + "/v1/chat/completions",
        headers={"Authorization": "Bearer nope"},
        json={"messages": [{"role": "user", "content": "hi"}]},
    )
    assert_error(r, 401, "invalid_api_key")
    assert_error(httpx.get(server.url + "/metrics"), 401)
    still_serving(http)


def test_tokenize_detokenize_round_trip(http):
    text = "Once upon a time, there was a dog."
    r = http.post("/tokenize", json={"content": text, "add_special": True})
    assert r.status_code == 200
    body = r.json()
    ids = body["tokens"]
    assert ids[0] == 1 and body["count"] == len(ids) and body["max_model_len"] == 128
    assert http.post("/tokenize", json={"prompt": text}).json()["tokens"] == ids[1:]
    r = http.post("/detokenize", json={"tokens": ids})
    assert r.json()["content"] == text
    pieces = http.post("/tokenize", json={"content": text, "with_pieces": True}).json()["tokens"]
    assert [p["id"] for p in pieces] == ids[1:]
    assert "".join(p["piece"] for p in pieces).strip() == text
    chat = http.post("/tokenize", json={"messages": [{"role": "user", "content": "hi"}]}).json()
    assert chat["tokens"][0] == 1 and chat["count"] > 3
    assert_error(http.post("/detokenize", json={"tokens": [1, 99999]}), 400, param="token_id")
    assert_error(http.post("/tokenize", json={}), 400)


def test_infill_without_fim_tokens_is_a_clear_400(http):
    r = http.post("/infill", json={"input_prefix": "def f(x):\n", "input_suffix": "\n"})
    err = assert_error(r, 400, "fim_not_supported")
    assert "fill-in-the-middle" in err["message"]
    r = http.post("/v1/completions", json={"prompt": "def f(", "suffix": "):\n", "max_tokens": 2})
    assert_error(r, 400, "fim_not_supported", "suffix")
    still_serving(http)


def test_metrics(http):
    still_serving(http)
    text = http.get("/metrics").text
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    assert samples['localllm_requests_total{endpoint="completions",finish_reason="length"}'] >= 1
    assert samples["localllm_time_to_first_token_seconds_count"] >= 1
    assert samples["localllm_inter_token_latency_seconds_count"] >= 1
    assert samples["localllm_generation_tokens_total"] >= 2
    assert samples["localllm_prompt_tokens_total"] >= 2
    assert samples["localllm_kv_blocks_used"] == 0
    assert samples["localllm_kv_blocks_free"] == samples["localllm_kv_blocks_total"] > 0
    for name in (
        "localllm_queue_waiting_requests",
        "localllm_prefix_cache_hit_rate",
        "localllm_spec_acceptance_rate",
        "localllm_preemptions_total",
    ):
        assert name in samples
    assert samples['localllm_http_requests_total{route="/v1/completions",status="200"}'] >= 1


BAD_BODIES = [  # (route, body, status, code, param)
    ("/v1/chat/completions", {"messages": "hi"}, 400, "invalid_type", "messages"),
    ("/v1/chat/completions", {"messages": []}, 400, None, "messages"),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "wizard", "content": "x"}]},
        400,
        None,
        "messages[0].role",
    ),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "x"}], "max_tokens": -5},
        400,
        "invalid_value",
        "max_tokens",
    ),
    ("/v1/completions", {"prompt": "x", "max_tokens": "lots"}, 400, "invalid_type", "max_tokens"),
    ("/v1/completions", {"prompt": "x", "temperature": "hot"}, 400, "invalid_type", "temperature"),
    ("/v1/completions", {"prompt": "x", "temperature": 3.5}, 400, "invalid_value", "temperature"),
    ("/v1/completions", {"prompt": "x", "n": 0}, 400, "invalid_value", "n"),
    ("/v1/completions", {"prompt": "x", "n": 1000}, 400, "invalid_value", "n"),
    ("/v1/completions", {"prompt": [], "max_tokens": 1}, 400, None, "prompt"),
    ("/v1/completions", {"prompt": [1, 5000]}, 400, None, "prompt"),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2},
        400,
        None,
        "top_logprobs",
    ),
    ("/v1/completions", {"prompt": "x", "echo": True, "logprobs": 1}, 400, None, "echo"),
]


@pytest.mark.parametrize("route,body,status,code,param", BAD_BODIES)
def test_bad_parameters(http, route, body, status, code, param):
    assert_error(http.post(route, json=body), status, code, param)


def test_malformed_json_and_non_json(http):
    r = http.post(
        "/v1/chat/completions",
        content=b'{"messages": [',
        headers={"content-type": "application/json"},
    )
    assert_error(r, 400, "invalid_json")
    r = http.post(
        "/v1/completions",
        content=b"prompt=hi",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert_error(r, 415, "unsupported_media_type")
    assert_error(
        http.post(
            "/v1/completions", content=b"[1, 2]", headers={"content-type": "application/json"}
        ),
        400,
    )
    # curl -d without -H sends form encoding: refused (a browser can send that cross-site)
    r = http.post(
        "/tokenize",
        content=b'{"content": "Once"}',
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert_error(r, 415, "unsupported_media_type")
    r = http.post(
        "/tokenize",
        content=b'{"content": "Once"}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 200 and r.json()["count"] >= 1
    still_serving(http)


def test_neutral_values_of_unimplemented_fields_are_accepted(http):
    r = http.post(
        "/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2,
            "temperature": 0,
            "response_format": {"type": "text"},
            "parallel_tool_calls": False,
            "metadata": {"a": "b"},
            "user": "u1",
            "store": False,
        },
    )
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 2


def test_prompt_longer_than_context(http):
    long = "The dog ran to the park. " * 40  # > 128 tokens
    for route, body in (
        ("/v1/completions", {"prompt": long}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": long}], "stream": True}),
    ):
        err = assert_error(http.post(route, json=body), 400, "context_length_exceeded")
        assert "128" in err["message"]
    # an explicit max_tokens beyond the context is clamped to what is left
    r = http.post(
        "/v1/completions",
        json={"prompt": "Once", "max_tokens": 10_000, "temperature": 0, "ignore_eos": True},
    )
    assert r.status_code == 200
    usage = r.json()["usage"]
    assert usage["total_tokens"] == 128 and r.json()["choices"][0]["finish_reason"] == "length"
    still_serving(http)


def test_unknown_route_method_and_large_body(http):
    assert_error(http.get("/v1/nothing"), 404, "unknown_url")
    assert_error(http.get("/v1/completions"), 405)
    assert http.get("/v1/models/other-model").json()["id"] == "stories260K"
    big = json.dumps({"prompt": "x" * (17 * 1024 * 1024)}).encode()
    r = http.post("/v1/completions", content=big, headers={"content-type": "application/json"})
    assert_error(r, 413, "request_too_large")
    still_serving(http)


def test_stream_is_openai_sse(http):
    with http.stream(
        "POST",
        "/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-2]["choices"][0]["delta"] == {}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 4
    assert len({c["id"] for c in chunks}) == 1
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)


def test_cors_preflight_needs_no_key():
    settings = ServerSettings("m", api_key="k", cors_origins=("http://localhost:3000",))
    with BackgroundServer(create_app(settings, lambda: None)) as srv:  # type: ignore[arg-type]
        r = httpx.options(
            srv.url + "/v1/chat/completions",
            headers={
                "Origin": "http://localhost:3000",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "http://localhost:3000"
        r = httpx.get(srv.url + "/health", headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in r.headers


def test_cli_arguments_to_settings():
    from localllm.cli import build_parser
    from localllm.cli.serve import settings_from_args

    args = build_parser().parse_args(
        [
            "serve",
            "--model",
            "/models/qwen2.5-coder-1.5b-q8_0.gguf",
            "--api-key",
            "k",
            "--cors-origin",
            "http://a",
            "--cors-origin",
            "http://b",
            "--port",
            "9000",
        ]
    )
    s = settings_from_args(args)
    assert (args.host, args.port) == ("127.0.0.1", 9000)
    assert s.model_name == "qwen2.5-coder-1.5b-q8_0" and s.serves("qwen2.5-coder-1.5b-q8_0.gguf")
    assert s.api_key == "k" and s.cors_origins == ("http://a", "http://b")
    named = settings_from_args(
        build_parser().parse_args(["serve", "-m", "x.gguf", "--served-model-name", "coder"])
    )
    # any model name is answered (llama-server's way) unless --strict-model-name
    assert named.model_name == "coder" and named.serves("y") and named.serves("gpt-4o")
    strict = settings_from_args(
        build_parser().parse_args(
            ["serve", "-m", "x.gguf", "--served-model-name", "coder", "--strict-model-name"]
        )
    )
    assert strict.serves("coder") and strict.serves("x.gguf") and strict.serves("coder:latest")
    assert not strict.serves("y")


@pytest.mark.parametrize(
    "argv,env,message",
    [
        (["--api-key", ""], None, "--api-key (or LOCALLLM_API_KEY) is set but empty"),
        ([], "", "--api-key (or LOCALLLM_API_KEY) is set but empty"),
        (["--max-n", "0"], None, "--max-n must be >= 1, got 0"),
        (["--port", "99999"], None, "--port must be in [0, 65535], got 99999"),
        (["--port", "-1"], None, "--port must be in [0, 65535], got -1"),
    ],
)
def test_bad_serve_options_exit_2_with_one_line(monkeypatch, capsys, argv, env, message):
    from localllm.cli import main

    if env is not None:
        monkeypatch.setenv("LOCALLLM_API_KEY", env)
    model = str(data_path("models", "stories260K.gguf"))
    assert main(["serve", "--model", model, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"localllm: error: {message}"), err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_localllm_serve_command(tmp_path):
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable,
        "-m",
        "localllm.cli",
        "serve",
        "--model",
        str(data_path("models", "stories260K.gguf")),
        "--device",
        "cpu",
        "--port",
        str(port),
        "--max-model-len",
        "64",
        "--api-key",
        "cli-key",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(proc, url, 60, 0.1)
        r = httpx.post(
            url + "/v1/completions",
            headers={"Authorization": "Bearer cli-key"},
            json={"prompt": "Once", "max_tokens": 3, "temperature": 0},
        )
        assert r.status_code == 200 and r.json()["model"] == "stories260K"
    finally:
        proc.terminate()
        proc.wait(20)


def test_localllm_serve_bad_model_exits_with_one_line(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "localllm.cli",
            "serve",
            "--model",
            str(bad),
            "--port",
            "0",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert f"localllm: error: {bad}" in out.stderr
