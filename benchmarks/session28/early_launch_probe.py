"""The measurement session 28 could not run (no device time left): the wall time of a batch-1
verify step (k = 4) of pycode-22m with `early_launch.patch`'s early launch on and off, in one
process, against a plain decode step, two rounds.

Here: git apply benchmarks/session28/early_launch.patch (it needs the patch: `_launchable`,
`steps_early`). There: source scripts/device_setup.sh; python3
"$LOCALLLM_REPO"/benchmarks/session28/early_launch_probe.py (or early_launch_next.sh, which
runs it)
"""

from __future__ import annotations

import os

from localllm.config import EngineConfig
from localllm.engine.engine import LLMEngine
from localllm.engine.speculative.calibrate import step_seconds


def main() -> None:
    model = os.path.join(os.environ["LOCALLLM_TESTDATA"], "models", "pycode-22m-q4_k_m.gguf")
    eng = LLMEngine(EngineConfig(model=model, max_model_len=4096, spec_tokens=4))
    real = eng._launchable
    for rnd in range(2):
        for name, k, early in (("plain", 0, True), ("k4 early", 4, True), ("k4 serial", 4, False)):
            eng._launchable = real if early else (lambda *a: False)  # type: ignore[method-assign]
            e0, s0 = eng.stats.steps_early, eng.stats.steps
            us = step_seconds(eng, 1, k, 300, 512) * 1e6
            early_n, steps = eng.stats.steps_early - e0, eng.stats.steps - s0
            print(f"round {rnd} {name}: {us:.1f} us/step, {early_n} of {steps} launched early")


if __name__ == "__main__":
    main()
