#!/usr/bin/env bash
# Session 37 call 1 (fresh machine): llama.cpp builds in the background at the lowest CPU
# priority (for `scripts/compare_llamacpp.sh part2 / part3` in calls 2 / 3); both synthetic
# models are written first; then the GPU tests of the final code (engine, speculation, the
# attention kernels); then part1 waits for the build.
set -uo pipefail
R=$PWD
pgrep -f "llamacpp.sh build" >/dev/null || setsid nohup nice -n 19 bash .carry/anchors/llamacpp.sh build > /tmp/lc-build.log 2>&1 &
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 150 python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama3-8b-q4_k_m', 'llama2-7b-q4_0'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1
cat "$OUT/models.log"
t timeout 240 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  "$R"/tests/test_gpu_spec.py > "$OUT/gpu_tests_engine.log" 2>&1
grep -E "passed|failed|error" "$OUT/gpu_tests_engine.log" | tail -6
t timeout 110 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_attention.py \
  > "$OUT/gpu_tests_attention.log" 2>&1
grep -E "passed|failed|error" "$OUT/gpu_tests_attention.log" | tail -6
cd "$R" && t timeout 60 bash scripts/compare_llamacpp.sh part1 > "$OUT/part1.log" 2>&1
tail -3 "$OUT/part1.log"; tail -2 /tmp/lc-build.log
