"""The verify price an engine measures for itself (engine/speculative/calibrate.py): the line
through its measured costs, the price the policy drafts by, the measurement on a real engine
(CPU here; tests/test_gpu_spec.py checks the start-up one), and the policy replay script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import conftest
import pytest

from localllm.config import EngineConfig
from localllm.engine.engine import LLMEngine
from localllm.engine.speculative import calibrate
from localllm.engine.speculative.calibrate import (
    PRICE_CACHE,
    calibrated_ks,
    calibration_fits,
    engine_price,
    measure_price,
    plausible,
    price_key,
    price_line,
)
from localllm.engine.speculative.policy import (
    MIN_PRICE_PER_DRAFT,
    PRICE_DISCOUNT,
    best_draft_len,
    drafting_price,
)

SIM = Path(__file__).resolve().parents[1] / "scripts" / "spec_policy_sim.py"


def test_price_line_and_drafting_price() -> None:
    assert price_line({4: 1.817, 8: 2.575}) == pytest.approx((0.059, 0.1895))
    assert price_line({2: 1.5}) == pytest.approx((0.0, 0.25))  # one point: all per draft
    assert drafting_price(0.058, 0.19) == pytest.approx((0.058 * PRICE_DISCOUNT, 0.19 * 0.7))
    # noise can tilt a flat line: never a negative fixed part, never free drafts
    assert drafting_price(-0.1, -0.02) == (0.0, PRICE_DISCOUNT * MIN_PRICE_PER_DRAFT)
    # a small model's price (verify steps cannot hide host time) drafts rarely but long
    small, big = drafting_price(1.4, 0.09), drafting_price(0.058, 0.19)
    assert best_draft_len(0.5, 8, small[1], small[0]) == 0 < best_draft_len(0.5, 8, big[1], big[0])
    assert best_draft_len(0.8, 8, small[1], small[0]) == 8 > best_draft_len(0.8, 8, big[1], big[0])


def test_measure_price_on_an_engine_leaves_it_clean() -> None:
    path = conftest.testdata_path("models", "stories260K.gguf")
    eng = LLMEngine(EngineConfig(model=str(path), device="cpu", spec_tokens=6, max_model_len=512))
    assert eng.speculator.policy.cost_per_draft == 0.05  # the CPU table: nothing measured
    assert calibration_fits(6, 512) and not calibration_fits(15, 256)
    steps = eng.stats.steps
    fixed, per = measure_price(eng, 6)
    assert fixed == fixed and per == per and abs(fixed) < 50 and abs(per) < 10  # finite
    assert eng.stats.steps > steps + 3 * 12  # three points of 12 timed steps
    bm = eng.block_manager
    assert bm.num_used_blocks == 0 and not eng.requests and not len(eng.speculator)
    eng._forget_calibration()
    assert eng.stats.steps == 0 and bm.num_cached_blocks == 0 and bm.queries == 0


def test_policy_replay_script(tmp_path) -> None:
    """scripts/spec_policy_sim.py records greedy outputs and replays the policy on them: a
    dearer told price drafts less."""
    path = str(conftest.testdata_path("models", "stories260K.gguf"))
    args = ["--model", path, "--which", "story", "--gen", "48", "--k", "6", "--true", "0.2,0.1",
            "--prices", "0.0,0.02", "0.5,0.3", "--cache", str(tmp_path / "rec.json")]  # fmt: skip
    r = subprocess.run([sys.executable, str(SIM), *args], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    drafted = {}
    for line in r.stdout.splitlines():  # told 0.0,0.02 grounded speedup 1.234x, acceptance ..
        f = line.split()
        drafted[f[1], f[2]] = int(f[-1])
        assert float(f[4].rstrip("x,")) > 0
    cheap = sum(v for (p, _), v in drafted.items() if p == "0.0,0.02")
    dear = sum(v for (p, _), v in drafted.items() if p == "0.5,0.3")
    assert cheap > dear, drafted
    assert (tmp_path / "rec.json").exists()


def test_engine_price_is_measured_once_per_model_and_gpu(tmp_path, monkeypatch) -> None:
    """The measured price goes to the cache folder; a later start reuses it (the same drafts,
    the same greedy tokens, run after run); an unreadable cache is measured again, an
    unwritable one only costs the shortcut."""
    monkeypatch.setenv("LOCALLLM_CACHE", str(tmp_path))
    path = conftest.testdata_path("models", "stories260K.gguf")
    eng = LLMEngine(EngineConfig(model=str(path), device="cpu", spec_tokens=4, max_model_len=512))
    calls = []
    monkeypatch.setattr(calibrate, "measure_price", lambda e, k: calls.append(k) or (0.5, 0.02))
    assert engine_price(eng, 4) == (0.5, 0.02) and calls == [4]
    cached = json.loads((tmp_path / PRICE_CACHE).read_text())
    assert cached == {price_key(eng, 4): [0.5, 0.02]}
    assert engine_price(eng, 4) == (0.5, 0.02) and calls == [4]  # reused, not measured
    assert engine_price(eng, 6) == (0.5, 0.02) and calls == [4, 6]  # another draft limit
    assert "stories260K" in price_key(eng, 4) and "kv=" in price_key(eng, 4)
    (tmp_path / PRICE_CACHE).write_text("{not json")
    assert engine_price(eng, 4) == (0.5, 0.02) and calls == [4, 6, 4]
    assert json.loads((tmp_path / PRICE_CACHE).read_text())[price_key(eng, 4)] == [0.5, 0.02]
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("LOCALLLM_CACHE", str(blocked))  # a file where the folder should be
    assert engine_price(eng, 4) == (0.5, 0.02) and calls == [4, 6, 4, 4]


def test_engine_drafts_by_the_measured_price_or_else_the_table(monkeypatch) -> None:
    """What LLMEngine does at start-up on a GPU (CUDA graphs, speculation on), driven on the CPU:
    it drafts by 0.7x the engine's price; a measurement that fails (here: after admitting its
    sequence) leaves the table's price, no request and no block behind."""
    import localllm.engine.engine as engine_mod
    from localllm.errors import RequestError

    path = conftest.testdata_path("models", "stories260K.gguf")
    eng = LLMEngine(EngineConfig(model=str(path), device="cpu", spec_tokens=4, max_model_len=512))
    pol = eng.speculator.policy
    table = (pol.cost_fixed, pol.cost_per_draft)
    monkeypatch.setattr(engine_mod, "engine_price", lambda e, k: (1.0, 0.1))
    eng._price_verify_steps(4)
    assert (pol.cost_fixed, pol.cost_per_draft) == pytest.approx((0.7, 0.07))
    pol.cost_fixed, pol.cost_per_draft = table

    def fails(e: LLMEngine, k: int) -> tuple[float, float]:
        e.add_request([1, 5, 6, 7], engine_mod.SamplingParams(max_tokens=8, temperature=0.0))
        e.step()
        raise RequestError("no room")

    monkeypatch.setattr(engine_mod, "engine_price", fails)
    eng._price_verify_steps(4)
    assert (pol.cost_fixed, pol.cost_per_draft) == table
    bm = eng.block_manager
    assert not eng.requests and bm.num_used_blocks == 0 and eng.stats.steps == 0


def test_an_unbelievable_price_is_measured_again_and_never_stored(tmp_path, monkeypatch) -> None:
    """Verify steps no dearer than plain ones (timed steps that waited on a busy host) are
    measured once more; a second such price serves the run but is not kept for later starts.
    A small model's line (a fixed part, drafts nearly free) is believed."""
    monkeypatch.setenv("LOCALLLM_CACHE", str(tmp_path))
    path = conftest.testdata_path("models", "stories260K.gguf")
    eng = LLMEngine(EngineConfig(model=str(path), device="cpu", spec_tokens=4, max_model_len=512))
    flat, real = (-0.1, 0.01), (0.3, 0.0)
    assert not plausible(flat, 4) and plausible(real, 4) and plausible((-0.05, 0.2), 4)
    assert calibrated_ks(8) == [4, 8] and calibrated_ks(2) == [2]
    prices = [flat, real]
    monkeypatch.setattr(calibrate, "measure_price", lambda e, k: prices.pop(0))
    assert engine_price(eng, 4) == real and not prices  # measured twice, the second kept
    assert json.loads((tmp_path / PRICE_CACHE).read_text()) == {price_key(eng, 4): list(real)}
    prices[:] = [flat, flat]
    assert engine_price(eng, 6) == flat and not prices  # used, not stored
    assert price_key(eng, 6) not in json.loads((tmp_path / PRICE_CACHE).read_text())
    prices[:] = [real]
    assert engine_price(eng, 6) == real and not prices  # the next start measures again
