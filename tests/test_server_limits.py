"""llama.cpp's per-request limits (n_indent, t_max_predict_ms, t_max_prompt_ms) on a fake
event stream, and the `samplers` list and unimplemented-field table, without a model."""

from __future__ import annotations

import asyncio

import pytest

from localllm.core import TokenEvent, Usage
from localllm.errors import RequestError
from localllm.server.fields import FieldError, check_extra, find_bad_text
from localllm.server.limits import Limits, PromptTimeout, first_within, indent_cut, limited
from localllm.server.params import apply_samplers


def test_indent_cut_follows_llama_server():
    assert indent_cut("    x = 1\n    y\nz", 4) == (16, 15)  # "z" is below the block: cut
    assert indent_cut("    x = 1\n    y\n  ", 4)[0] is None  # no text on the line yet
    assert indent_cut("a\n\n    b\n", 4)[0] is None  # blank lines never end the block
    assert indent_cut("first line is free\n  two", 4)[0] == 21  # cut after the indentation
    assert indent_cut("no newline at all", 4)[0] is None


async def fake_events(pieces, delay=0.0, finish=True):
    for i, text in enumerate(pieces):
        await asyncio.sleep(delay)
        yield 0, TokenEvent("r", text, [i])
    if finish:
        yield 0, TokenEvent("r", "", [], finish_reason="stop", usage=Usage(3, len(pieces)))


async def run(events):
    return [ev async for _, ev in events]


def test_n_indent_stops_and_cuts_the_line():
    pieces = ["    a = 1", "\n", "    b = 2\n", "c", " = 3\n", "    d\n"]
    out = asyncio.run(run(limited(fake_events(pieces), Limits(n_indent=4), 3)))
    assert "".join(e.text for e in out) == "    a = 1\n    b = 2\n"
    assert out[-1].finish_reason == "length" and out[-1].usage.completion_tokens == 4


def test_predict_time_limit_waits_for_a_newline():
    clock = [0.0]

    async def ticking(pieces):
        for i, text in enumerate(pieces):
            clock[0] += 1.0  # each token takes a second
            yield 0, TokenEvent("r", text, [i])

    pieces = ["a", "b", "c", "\n", "d", "e", "f"]
    out = asyncio.run(
        run(limited(ticking(pieces), Limits(t_max_predict_ms=1500), 1, lambda: clock[0]))
    )
    # 1.5 s pass after "b", but it stops only once a newline has been generated
    assert "".join(e.text for e in out) == "abc\n"
    assert out[-1].finish_reason == "length"


def test_predict_time_limit_does_not_wait_for_a_slow_token():
    async def main():
        pieces = ["x\n"] + ["y"] * 5
        events = limited(fake_events(pieces, delay=0.2), Limits(t_max_predict_ms=50), 1)
        t0 = asyncio.get_running_loop().time()
        out = await run(events)
        return out, asyncio.get_running_loop().time() - t0

    out, seconds = asyncio.run(main())
    assert "".join(e.text for e in out) == "x\n" and seconds < 0.4


def test_prompt_time_limit():
    async def main():
        with pytest.raises(PromptTimeout):
            await first_within(fake_events(["a"], delay=0.5), 20)
        ok = await first_within(fake_events(["a", "b"], delay=0.001), 2000)
        return await run(ok)

    assert "".join(e.text for e in asyncio.run(main())) == "ab"


def test_samplers_switch_off_what_they_leave_out():
    base = dict(temperature=0.5, top_k=40, top_p=0.9, min_p=0.1, repetition_penalty=1.3)
    kept = apply_samplers(base, ["top_k", "top_p", "infill"])
    assert kept["top_k"] == 40 and kept["top_p"] == 0.9
    assert kept["temperature"] == 1.0 and kept["min_p"] == 0.0 and kept["repetition_penalty"] == 1.0
    off = {"top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0}
    assert apply_samplers(base, "kt") == {
        **base,
        **off,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }
    assert apply_samplers(base, None) == base
    with pytest.raises(RequestError):
        apply_samplers(base, ["top_k", "beam"])


def test_unsupported_table():
    check_extra({"tools": [], "response_format": {"type": "text"}, "typical_p": 1.0}, {})
    check_extra({"repeat_last_n": 64}, {"repeat_penalty": 1.0})
    for extra, body in (
        ({"tools": [{"type": "function"}]}, {}),
        ({"repeat_last_n": 64}, {"repeat_penalty": 1.1}),
        ({"xtc_threshold": 0.2}, {"xtc_probability": 0.5}),
        ({"num_thread": 4}, {}),
        ({"nonsense": 1}, {}),
    ):
        with pytest.raises(FieldError) as e:
            check_extra(extra, {**body, **extra})
        assert e.value.param == next(iter(extra))


def test_find_bad_text():
    assert find_bad_text({"a": ["ok", {"b": "x\ud800"}]}) == "a[1].b"
    assert find_bad_text({"\udfff": 1}) == "<key>"
    assert find_bad_text({"a": "fine \U0001f600"}) is None
