#!/usr/bin/env bash
# Session 31 call 1: the GPU tests on the final code (engine and speculation files first, then the
# kernel, format and sampler files), while llama.cpp builds and both synthetic models are written
# in the background for the side-by-side table of calls 2 and 3 (scripts/compare_llamacpp.sh).
set -uo pipefail
R=$PWD
setsid nohup bash .carry/anchors/llamacpp.sh build > /tmp/lc-build.log 2>&1 &
source scripts/device_setup.sh
(python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama3-8b-q4_k_m', 'llama2-7b-q4_0'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1 &)
s=$(date +%s)
timeout 540 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE --durations=15 \
  "$R"/tests/test_gpu_engine.py "$R"/tests/test_gpu_spec.py "$R"/tests/test_gpu_guided.py \
  "$R"/tests/test_kernels_*.py "$R"/tests/test_formats_*.py "$R"/tests/test_sampler.py \
  "$R"/tests/test_engine_close.py > "$OUT/gpu_tests.log" 2>&1
echo "pytest rc=$? [$(( $(date +%s) - s )) s]"
grep -E "passed|failed|error" "$OUT/gpu_tests.log" | tail -5
tail -3 /tmp/lc-build.log /tmp/llamacpp-anchor/build.log 2>/dev/null; cat "$OUT/models.log"
