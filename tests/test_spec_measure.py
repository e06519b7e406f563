"""scripts/spec_measure.py end to end on the CPU with tiny sizes: every section runs and the
JSON holds what BENCHMARKS.md needs (stories260K stands in for the 8B and the real models)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import conftest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "spec_measure.py"


def test_spec_measure_runs_on_cpu(tmp_path) -> None:
    stories = str(conftest.testdata_path("models", "stories260K.gguf"))
    args = ["--device", "cpu", "--cost-model", stories, "--pycode", stories, "--smollm2", "none",
            "--gen", "6", "--steps", "1", "--batches", "1,2", "--streams", "3",
            "--stream-gen", "4", "--ks", "2,3", "--repeats", "1", "--out", str(tmp_path)]  # fmt: skip
    r = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "suggested DEFAULT_SPEC_MAX_BATCH" in r.stdout and "streams: off" in r.stdout
    res = json.loads((tmp_path / "spec_measure.json").read_text())
    costs = res["verify"]["batch"]
    assert set(costs) == {"1", "2"} and set(costs["1"]["verify"]) == {"2", "3"}
    assert all(v["cost"] > 0 for row in costs.values() for v in row["verify"].values())
    [m] = res["models"]
    assert set(m["batch1"]) == {"2", "3"}
    for kinds in m["batch1"].values():
        assert set(kinds) == {"grounded", "open"}
        assert all(k["identical"] == k["prompts"] and k["implied_8b"] > 0 for k in kinds.values())
    assert m["tok_s_off"] > 0 and m["tok_s_on"] > 0 and res["streams_8b"]["tok_s_on_no_cutoff"] > 0


def test_step_time_times_forced_verify_steps_inside_around() -> None:
    """`calibrate.step_seconds` (the verify-cost figure, scripts/probe_verify.py): `around` is
    entered once, and the steps inside it are verify steps of exactly k forced drafts each."""
    from contextlib import contextmanager

    from localllm.config import EngineConfig
    from localllm.engine.engine import LLMEngine
    from localllm.engine.speculative.calibrate import step_seconds

    stories = str(conftest.testdata_path("models", "stories260K.gguf"))
    eng = LLMEngine(EngineConfig(model=stories, device="cpu", spec_tokens=4, max_model_len=256))
    inside: list[tuple[int, int]] = []

    @contextmanager
    def around():
        steps, drafted = eng.stats.steps, eng.stats.spec_proposed
        yield
        inside.append((eng.stats.steps - steps, eng.stats.spec_proposed - drafted))

    seconds = step_seconds(eng, 1, 3, steps=4, context=16, around=around())
    assert seconds > 0 and inside == [(4, 4 * 3)]
    assert not eng.scheduler.running and not eng.scheduler.waiting  # its requests are aborted


def test_probe_streams_runs_on_cpu(tmp_path) -> None:
    """scripts/probe_streams.py (BENCHMARKS.md, session 13): per run tok/s and the slowest steps."""
    stories = str(conftest.testdata_path("models", "stories260K.gguf"))
    script = SCRIPT.parent / "probe_streams.py"
    args = [stories, "--which", "story", "--streams", "3", "--gen", "6", "--ks", "0,2"]
    r = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith("k=")]
    assert [x.split()[0] for x in lines] == ["k=0", "k=0", "k=2", "k=2"]
    assert all("tok/s" in x and "slowest" in x for x in lines)


def test_probe_host_verify_steps_take_every_draft(tmp_path) -> None:
    """scripts/probe_host.py --spec-tokens K (BENCHMARKS.md, session 14): the stubbed device
    continues the prompt, so after the policy's ramp-up every step takes K drafts + 1; its
    --profile prints by own time, or `--profile cumulative` with callees."""
    stories = str(conftest.testdata_path("models", "stories260K.gguf"))
    script = SCRIPT.parent / "probe_host.py"

    def probe(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), "--model", stories, *args],
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)  # fmt: skip

    for k, tokens in ((0, "1.00"), (4, "5.00")):
        r = probe("--steps", "40", "--batch", "2", "--spec-tokens", str(k))
        assert r.returncode == 0, r.stderr
        assert f"{tokens} tokens per sequence" in r.stdout, r.stdout
    for order, says in ((None, "internal time"), ("cumulative", "cumulative time")):
        r = probe("--steps", "5", "--profile", *([order] if order else []))
        assert r.returncode == 0 and f"Ordered by: {says}" in r.stdout, r.stderr
