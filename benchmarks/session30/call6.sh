#!/usr/bin/env bash
# Session 30 call 6 (issue 15): call 5's failed GPU test alone with its output, the GPU
# speculation / overlap tests again, and pycode-22m's speedups on the final code (k = 8 and the
# engine's own limit; each prompt off and on three times in turn, each keeping its fastest run).
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
timeout 90 python3 -m pytest -x -s -q -m gpu -p no:cacheprovider "$R"/tests/test_gpu_spec.py -k verify_price 2>&1 | grep -E "drafting price|assert|Error|passed|failed" | head -20
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider "$R"/tests/test_gpu_engine.py "$R"/tests/test_gpu_spec.py -k "overlap or spec or golden or current_stream" 2>&1 | grep -E "^E |passed|failed" | head -20
t() { local s; s=$(date +%s); "$@"; echo "[$(( $(date +%s) - s )) s]"; }
t timeout 120 python3 "$R"/scripts/spec_measure.py --skip-cost --smollm2 none --ks 8 --streams 32 --stream-gen 64 --repeats 3 --out "$OUT"/fixed
t timeout 120 python3 "$R"/scripts/spec_measure.py --skip-cost --smollm2 none --auto --streams 32 --stream-gen 64 --repeats 3 --out "$OUT"/auto
