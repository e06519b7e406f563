#!/usr/bin/env bash
# Session 30 call 7 (issue 15): the final code (prompts indexed while they prefill, not beyond
# the speculation batch cutoff): pycode-22m's speedups at k = 8 and the engine's own limit with 32
# streams on and off, then the GPU speculation / overlap tests.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "[$(( $(date +%s) - s )) s]"; }
t timeout 100 python3 "$R"/scripts/spec_measure.py --skip-cost --smollm2 none --ks 8 --streams 32 --stream-gen 64 --repeats 3 --out "$OUT"/fixed
t timeout 100 python3 "$R"/scripts/spec_measure.py --skip-cost --smollm2 none --auto --streams 32 --stream-gen 64 --repeats 3 --out "$OUT"/auto
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider "$R"/tests/test_gpu_engine.py "$R"/tests/test_gpu_spec.py -k "overlap or spec or current_stream" 2>&1 | grep -E "^E |passed|failed" | head -20
