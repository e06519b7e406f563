#!/usr/bin/env bash
# Session 34 call D (fresh machine): the GPU tests of speculation (with the verify-price fix,
# ae86b6b), the engine, guided decoding, engine close, the sampler and the formats, on the
# final code; call E runs the kernel test files.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 150 python3 -m pytest -q -s -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_spec.py > "$OUT/gpu_tests_spec.log" 2>&1
grep -E "passed|failed|error|drafting price" "$OUT/gpu_tests_spec.log" | tail -6
t timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py > "$OUT/gpu_tests_engine.log" 2>&1
grep -E "passed|failed|error" "$OUT/gpu_tests_engine.log" | tail -6
t timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_guided.py \
  "$R"/tests/test_engine_close.py "$R"/tests/test_sampler.py "$R"/tests/test_formats_*.py > "$OUT/gpu_tests_other.log" 2>&1
grep -E "passed|failed|error" "$OUT/gpu_tests_other.log" | tail -6
