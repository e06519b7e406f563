"""Speculation as users drive it: `localllm generate --spec-tokens`, the HTTP API's per-request
overrides (llama.cpp's `speculative.n_max` and our nested object), the usage counters, /infill
timings and /metrics, and the OpenAI client reading them."""

from __future__ import annotations

import json
import subprocess
import sys

import conftest
import httpx
import pytest
from openai import OpenAI
from test_server_fim import write_fim_vocab

from localllm.cli import main
from localllm.formats.synthetic import SyntheticSpec, write_synthetic
from localllm.server.background import model_server, wait_ready

STORY = "Lily saw a red ball. Lily was happy. Lily played with a red ball all day. " * 2


def _generate(*extra: str) -> subprocess.CompletedProcess:
    model = conftest.testdata_path("models", "stories260K.gguf")
    args = ["generate", "--model", str(model), "--prompt", STORY + "Lily", "-n", "40", "-t", "0"]
    return subprocess.run(
        [sys.executable, "-m", "localllm.cli", *args, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )


def test_generate_spec_tokens_same_text_and_a_summary_of_drafts() -> None:
    on, off = _generate("--spec-tokens", "4"), _generate("--spec-tokens", "0")
    assert on.returncode == 0 and off.returncode == 0, on.stderr + off.stderr
    assert on.stdout == off.stdout and on.stdout.strip()
    summary = on.stderr.strip().splitlines()[-1]
    accepted, drafted = map(int, summary.split("speculative: ")[1].split(" ")[0].split("/"))
    assert 0 < accepted <= drafted
    assert "speculative" not in off.stderr  # off by default on CPU: nothing to report


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--spec-tokens", "99"], "--spec-tokens must be in [0, 15]"),
        (
            ["--spec-ngram-min", "5", "--spec-ngram-max", "3"],
            "--spec-ngram-min <= --spec-ngram-max",
        ),
    ],
)
def test_bad_spec_flags_are_one_line_errors(flags: list[str], message: str, capsys) -> None:
    model = conftest.testdata_path("models", "stories260K.gguf")
    assert main(["generate", "--model", str(model), "--prompt", "x", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


@pytest.fixture(scope="module")
def server():
    path = conftest.testdata_path("models", "stories260K.gguf")
    srv = model_server(path, device="cpu", max_model_len=256, spec_tokens=0)  # off by default
    wait_ready(srv)
    yield srv
    srv.stop()


def _complete(url: str, **extra: object) -> dict:
    body = {"prompt": STORY + "Lily", "max_tokens": 40, "temperature": 0, **extra}
    r = httpx.post(url + "/v1/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_per_request_overrides_and_usage_counters(server) -> None:
    plain = _complete(server.url)
    assert plain["usage"]["speculative"] == {"drafted_tokens": 0, "accepted_tokens": 0}
    flat = _complete(server.url, **{"speculative.n_max": 4})
    nested = _complete(server.url, speculative={"n_max": 4, "n_min": 1})
    for body in (flat, nested):
        assert body["choices"][0]["text"] == plain["choices"][0]["text"]
        spec = body["usage"]["speculative"]
        assert 0 < spec["accepted_tokens"] <= spec["drafted_tokens"]
        details = body["usage"]["completion_tokens_details"]
        assert details["accepted_prediction_tokens"] == spec["accepted_tokens"]
        assert (
            details["rejected_prediction_tokens"]
            == spec["drafted_tokens"] - spec["accepted_tokens"]
        )
    picky = _complete(server.url, speculative={"n_max": 4, "n_min": 15})
    assert picky["usage"]["speculative"]["drafted_tokens"] == 0  # no proposal is that long
    r = httpx.post(
        server.url + "/v1/completions", json={"prompt": "x", "speculative.n_max": 16}, timeout=30
    )
    assert r.status_code == 400 and "speculative.n_max" in r.text


def test_openai_client_streams_usage_and_metrics_count_drafts(server) -> None:
    client = OpenAI(base_url=server.url + "/v1", api_key="unused")
    stream = client.chat.completions.create(
        model="stories260K",
        messages=[{"role": "user", "content": STORY}],
        max_tokens=30,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"speculative": {"n_max": 6}},
    )
    usage = [ch.usage for ch in stream if ch.usage is not None][-1]
    assert usage.completion_tokens_details is not None
    drafted = usage.model_extra["speculative"]["drafted_tokens"]
    assert drafted >= usage.completion_tokens_details.accepted_prediction_tokens
    metrics = httpx.get(server.url + "/metrics").text
    total = next(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("localllm_spec_draft_tokens_total")
    )
    assert total >= drafted > 0


def test_infill_reports_llama_cpp_draft_timings(tmp_path) -> None:
    """A random model with FIM tokens loops greedily, so drafts get verified: /infill's
    timings carry llama.cpp's draft_n / draft_n_accepted."""
    write_fim_vocab(tmp_path / "vocab.gguf")
    spec = SyntheticSpec("fim", vocab=320, dim=64, n_layers=2, n_heads=4, n_kv_heads=2,
                         ffn=128, context_length=256)  # fmt: skip
    model = write_synthetic(spec, tmp_path / "fim.gguf", seed=3, vocab_gguf=tmp_path / "vocab.gguf")
    srv = model_server(model, device="cpu", spec_tokens=4)
    try:
        wait_ready(srv)
        body = {"input_prefix": "ab" * 20, "input_suffix": "", "n_predict": 48, "temperature": 0}
        r = httpx.post(srv.url + "/infill", json=body, timeout=60)
        assert r.status_code == 200, r.text
        timings = r.json()["timings"]
        assert 0 <= timings["draft_n_accepted"] <= timings["draft_n"] and timings["draft_n"] > 0
        off = httpx.post(srv.url + "/infill", json={**body, "speculative.n_max": 0}, timeout=60)
        assert "draft_n" not in off.json()["timings"]
        assert off.json()["content"] == r.json()["content"]
    finally:
        srv.stop()


def test_bench_spec_compares_on_and_off(tmp_path, capsys) -> None:
    model = conftest.testdata_path("models", "stories260K.gguf")
    out = tmp_path / "spec.json"
    args = ["bench", "--model", str(model), "--device", "cpu", "-p", "0", "-n", "0", "--spec",
            "--spec-prompts", "story", "--spec-gen", "24", "-r", "2", "--json", str(out)]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "Speculative decoding, batch 1" in printed and "grounded (story)" in printed
    doc = json.loads(out.read_text())
    assert doc["scenarios"] == ["spec"]  # -p 0 -n 0 --spec: speculation alone, as before
    by_kind = {r["prompt"]: r for r in doc["results"]["spec"]}
    assert set(by_kind) == {"grounded", "open"}
    for r in by_kind.values():
        assert r["spec_tokens"] == 4 and r["gen"] == 24 and r["reps"] == 2
        assert r["identical"] == r["prompts"] > 0  # greedy: speculation changes no token
        assert r["tok_s_on"] > 0 and r["tok_s_off"] > 0
    assert by_kind["grounded"]["accepted"] > 0
    assert main([*args[:-4], "--spec-tokens", "0"]) == 2
    assert "give --spec-tokens >= 1" in capsys.readouterr().err
    # given, the limit is the flag's
    assert main([*args[:-4], "--spec-tokens", "6", "--json", str(out)]) == 0
    assert {r["spec_tokens"] for r in json.loads(out.read_text())["results"]["spec"]} == {6}


def test_bench_compare_keeps_each_prompts_fastest_run(monkeypatch) -> None:
    """compare(repeats=R): off and on alternate R times per prompt; each mode's time is its
    fastest run, and a repeat whose speculating tokens differ makes the prompt not identical."""
    from localllm.bench import spec as bench_spec

    calls: list[tuple[int, int]] = []
    times = iter([9.0, 4.0, 3.0, 6.0, 5.0, 2.0] + [1.0] * 6)  # per timed run, in order

    def fake(engine, ids, gen, k):
        calls.append((ids[0], k))
        if len(calls) == 1:  # the warm-up
            return bench_spec.Run([0, 1], 1.0, 0, 0, 0)
        toks = [0] + [1] * 10
        if len(calls) == 11:  # prompt 8's second speculating run parts
            toks = [0] + [2] * 10
        return bench_spec.Run(toks, next(times), 4 if k else 0, 3 if k else 0, 1 if k else 0)

    monkeypatch.setattr(bench_spec, "generate_one", fake)
    res = bench_spec.compare(None, [("grounded", [7]), ("open", [8])], 10, 4, repeats=3)
    assert calls == [(7, 4)] + [(7, 0), (7, 4)] * 3 + [(8, 0), (8, 4)] * 3
    g = res["grounded"]
    assert g["tok_s_off"] == 10 / 3.0 and g["tok_s_on"] == 10 / 2.0  # best of 9, 3, 5 / 4, 6, 2
    assert g["identical"] == 1 and g["drafted"] == 4 and g["accepted"] == 3
    assert res["open"]["identical"] == 0
