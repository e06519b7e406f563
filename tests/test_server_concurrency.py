"""Many concurrent streams give the same text as one at a time; disconnects free KV at once
(with step overlap too)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from conftest import testdata_path as data_path

from localllm.server.background import model_server, wait_ready

openai = pytest.importorskip("openai")

KEY = "sk-conc"
NAMES = ["Lily", "Tom", "Sue", "Max"]
PLACES = ["park", "beach", "forest", "shop", "school", "garden", "zoo", "farm"]
PROMPTS = [f"{n} went to the {p}" for n in NAMES for p in PLACES]  # 32 prompts


@pytest.fixture(
    scope="module",
    params=[(None, "auto"), (40, "auto"), (40, "on")],
    ids=["big-pool", "tight-pool", "tight-pool-overlap"],
)
def server(request: pytest.FixtureRequest):
    # tight-pool: 40 blocks of 16 tokens for 32 streams forces waiting and preemption;
    # overlap: decode steps launched ahead of their tokens (engine/overlap.py; auto is off on
    # the CPU) under the same load, disconnects and timeouts
    blocks, overlap = request.param
    srv = model_server(
        data_path("models", "stories260K.gguf"),
        api_key=KEY,
        device="cpu",
        max_model_len=256,
        num_kv_blocks=blocks,
        block_size=16,
        step_overlap=overlap,
    )
    wait_ready(srv)
    yield srv
    srv.stop()


def stats(server) -> dict:
    r = httpx.get(server.url + "/stats", headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200
    return r.json()


def wait_idle(server, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = stats(server)
        if s["running"] == 0 and s["waiting"] == 0 and s["blocks_used"] == 0:
            return s
        assert time.monotonic() < deadline, f"engine still busy: {s}"
        time.sleep(0.02)


async def one_stream(client, prompt: str) -> str:
    stream = await client.completions.create(
        model="stories260K", prompt=prompt, max_tokens=16, temperature=0, stream=True
    )
    return "".join([c.choices[0].text async for c in stream])


def test_32_concurrent_streams_match_sequential(server):
    async def run() -> tuple[list[str], list[str]]:
        async with openai.AsyncOpenAI(
            base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120
        ) as client:
            sequential = [await one_stream(client, p) for p in PROMPTS]
            concurrent = await asyncio.gather(*(one_stream(client, p) for p in PROMPTS))
        return sequential, list(concurrent)

    sequential, concurrent = asyncio.run(run())
    assert all(sequential) and len(set(sequential)) >= 4  # different prompts, texts
    assert concurrent == sequential
    s = wait_idle(server)
    assert s["blocks_free"] == s["blocks_total"]  # every block free or (evictable) cached
    if s["blocks_total"] == 40:
        assert s["preemptions"] > 0  # the tight pool did exercise preemption
    assert (s["steps_ahead"] > 0) == server.app.state.ctx.holder.get().engine.overlap
    metrics = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"})
    assert f"localllm_engine_steps_ahead_total {float(s['steps_ahead'])}" in metrics.text


def test_disconnect_mid_stream_aborts_and_frees_blocks(server):
    before = stats(server)
    body = {
        "prompt": "Once upon a time",
        "max_tokens": 240,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
    ) as http:
        with http.stream("POST", "/v1/completions", json=body) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            got = [next(lines) for _ in range(6)]  # a few chunks, then hang up
            assert any(line.startswith("data: {") for line in got)
            assert stats(server)["running"] == 1
    s = wait_idle(server)
    assert s["requests_aborted"] == before["requests_aborted"] + 1
    assert s["requests_finished"] == before["requests_finished"]
    assert s["blocks_free"] == s["blocks_total"]


def test_non_streaming_client_timeout_aborts(server):
    before = stats(server)
    body = {
        "prompt": "Once upon a time",
        "max_tokens": 240,
        "temperature": 0,
        "ignore_eos": True,
        "n": 4,
    }
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            server.url + "/v1/completions",
            json=body,
            timeout=0.3,
            headers={"Authorization": f"Bearer {KEY}"},
        )
    s = wait_idle(server)
    assert s["requests_aborted"] == before["requests_aborted"] + 4
    assert s["requests_finished"] == before["requests_finished"]
