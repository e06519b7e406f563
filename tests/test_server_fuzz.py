"""Schema-driven fuzz: bodies generated from the server's own OpenAPI schema (valid ones,
ones with a field swapped for arbitrary JSON, and arbitrary JSON) never get a 5xx, and every
error has OpenAI's shape. Runs against a real uvicorn server with stories260K on CPU."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import httpx
import pytest
from conftest import testdata_path as data_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localllm.server.background import model_server, wait_ready

KEY = "sk-fuzz"
SMALL = 3  # cap on generated token counts and n, to keep each request short
CAPPED = ("max_tokens", "max_completion_tokens", "n_predict", "n", "top_logprobs", "logprobs")

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def from_schema(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> st.SearchStrategy:
    """A Hypothesis strategy for the JSON-schema subset pydantic emits."""
    if "$ref" in schema:
        return from_schema(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, depth)
    if "anyOf" in schema:
        return st.one_of([from_schema(s, defs, depth) for s in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return _object(schema, defs, depth)
    if kind == "array":
        items = from_schema(schema.get("items", {}), defs, depth + 1)
        return st.lists(
            items, min_size=schema.get("minItems", 0), max_size=min(schema.get("maxItems", 3), 3)
        )
    simple = {
        "string": st.text(max_size=20),
        "boolean": st.booleans(),
        "null": st.none(),
        "integer": st.integers(
            schema.get("minimum", schema.get("exclusiveMinimum", -5)), schema.get("maximum", 10**6)
        ),
        "number": st.floats(
            schema.get("minimum", schema.get("exclusiveMinimum", -5.0)),
            schema.get("maximum", 100.0),
            allow_nan=False,
            exclude_min="exclusiveMinimum" in schema,
        ),
    }
    return simple.get(kind, json_values)


def _object(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> st.SearchStrategy:
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = {k: from_schema(v, defs, depth + 1) for k, v in props.items()}
    return st.fixed_dictionaries(
        {k: s for k, s in fields.items() if k in required},
        optional={k: s for k, s in fields.items() if k not in required},
    )


def body_strategy(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy:
    valid = from_schema(schema, defs)
    names = sorted(defs[schema["$ref"].rsplit("/", 1)[-1]].get("properties", {}))
    mutated = st.tuples(valid, st.sampled_from(names), json_values).map(
        lambda t: {**t[0], t[1]: t[2]}
    )
    return st.one_of(valid, mutated, json_values)


def cap(body: Any) -> Any:
    """Keep generations tiny: small token counts and n, always a max_tokens."""
    if not isinstance(body, dict):
        return body
    out = dict(body)
    if isinstance(out.get("options"), dict):
        opts = out["options"] = {**out["options"], "num_predict": SMALL}
        opts.pop("num_ctx", None)
    for k in ("t_max_prompt_ms", "t_max_predict_ms"):
        if isinstance(out.get(k), int) and out[k] > 1000:
            out[k] = 1000
    for k in CAPPED:
        if isinstance(out.get(k), int) and not isinstance(out[k], bool) and out[k] > SMALL:
            out[k] = SMALL
    out.setdefault("max_tokens", SMALL)
    if isinstance(out.get("prompt"), list) and len(out["prompt"]) > SMALL:
        out["prompt"] = out["prompt"][:SMALL]
    return out


@pytest.fixture(scope="module")
def server():
    srv = model_server(
        data_path("models", "stories260K.gguf"), api_key=KEY, device="cpu", max_model_len=96
    )
    wait_ready(srv)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
    ) as c:
        yield c


@pytest.fixture(scope="module")
def openapi(http):
    return http.get("/openapi.json").json()


def check(r: httpx.Response) -> None:
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        err = r.json()["error"]
        if r.request.url.path.startswith("/api/"):  # Ollama's shape
            assert isinstance(err, str) and err
            return
        assert set(err) == {"message", "type", "param", "code"} and err["message"]
        return
    if r.headers["content-type"].startswith("application/x-ndjson"):
        for line in r.text.splitlines():
            assert "error" not in json.loads(line) or "internal" not in line, line
    elif r.headers["content-type"].startswith("text/event-stream"):
        for line in r.text.splitlines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                assert chunk.get("error", {}).get("type") != "server_error", line
    else:
        r.json()


ROUTES = [
    "/v1/chat/completions",
    "/v1/completions",
    "/infill",
    "/tokenize",
    "/detokenize",
    "/completion",
    "/api/chat",
    "/api/generate",
    "/api/show",
]


@pytest.mark.parametrize("route", ROUTES)
def test_fuzz_route_never_500(http, openapi, route):
    schema = openapi["paths"][route]["post"]["requestBody"]["content"]["application/json"]
    strategy = body_strategy(schema["schema"], openapi["components"]["schemas"])

    @settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=strategy)
    def run(body: Any) -> None:
        check(http.post(route, json=cap(body)))

    run()
    r = http.post("/v1/completions", json={"prompt": "Once", "max_tokens": 2})
    assert r.status_code == 200  # still serving
    wait_idle(http)


def wait_idle(http: httpx.Client, timeout: float = 30.0) -> None:
    """No request left running and every KV block free (prompt-only jobs finish on their own)."""
    deadline = time.monotonic() + timeout
    while (s := http.get("/stats").json())["running"] or s["waiting"] or s["blocks_used"]:
        assert time.monotonic() < deadline, s
        time.sleep(0.02)


class Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.seen.append(record.getMessage())


# lone surrogates, control characters, huge and tiny numbers, deep nesting: what a hostile
# client sends, in every field name any route knows
hostile_text = st.text(
    alphabet=st.characters(categories=["Cs", "Cc", "Lu", "Ll", "Nd", "Zs", "So"]), max_size=10
)
hostile_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.sampled_from([0, -1, 1, 2**31, 2**63, 2**64, 1e-300, 5e-324, 1e308, -0.0, 1e-46])
    | hostile_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_text, inner, max_size=3),
    max_leaves=6,
)


def test_hostile_bodies_across_routes(http, openapi):
    """A few hundred hostile bodies over every POST route: 0 tracebacks, 0 5xx, 0 hangs."""
    names = sorted(
        {k for d in openapi["components"]["schemas"].values() for k in d.get("properties", {})}
    )
    base = {"/api/chat": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}
    counter = Tracebacks()
    loggers = [logging.getLogger(n) for n in ("uvicorn.error", "uvicorn", "localllm")]
    for lg in loggers:
        lg.addHandler(counter)
    t0 = time.monotonic()
    try:

        @settings(max_examples=240, deadline=None, derandomize=True)
        @given(
            route=st.sampled_from(ROUTES),
            fields=st.dictionaries(
                st.sampled_from(names) | hostile_text, hostile_values, max_size=4
            ),
        )
        def run(route: str, fields: dict[str, Any]) -> None:
            body = cap({**base.get(route, {"prompt": "x", "model": "m"}), **fields})
            raw = json.dumps(body, ensure_ascii=True)  # lone surrogates travel as \ud800
            check(http.post(route, content=raw, headers={"content-type": "application/json"}))

        run()
    finally:
        for lg in loggers:
            lg.removeHandler(counter)
    assert counter.seen == [], counter.seen[:3]
    assert time.monotonic() - t0 < 240
    wait_idle(http)


def test_fuzz_raw_bytes_never_500(http):
    @settings(max_examples=40, deadline=None, derandomize=True)
    @given(
        raw=st.binary(max_size=64) | st.text(max_size=64).map(str.encode),
        route=st.sampled_from(ROUTES),
    )
    def run(raw: bytes, route: str) -> None:
        check(http.post(route, content=raw, headers={"content-type": "application/json"}))

    run()
