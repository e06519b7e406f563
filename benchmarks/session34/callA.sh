#!/usr/bin/env bash
# Session 34 call A (fresh machine): llama.cpp builds in the background for calls B / C
# (`scripts/compare_llamacpp.sh part2 / part3`); the GPU tests of the engine (all of
# test_gpu_engine.py, incl. the long-context graphs after session 33's host-side review
# commit ae09c4c), speculation, and the long-context attention kernels; then part1 (waits
# for the build, writes both synthetic models).
set -uo pipefail
R=$PWD
pgrep -f "llamacpp.sh build" >/dev/null || setsid nohup bash .carry/anchors/llamacpp.sh build > /tmp/lc-build.log 2>&1 &
source scripts/device_setup.sh
(python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama3-8b-q4_k_m', 'llama2-7b-q4_0'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1 &)
s=$(date +%s)
timeout 330 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu \
  "$R"/tests/test_gpu_engine.py "$R"/tests/test_gpu_spec.py > "$OUT/gpu_tests_engine.log" 2>&1
echo "pytest engine+spec rc=$? [$(( $(date +%s) - s )) s]"
grep -E "passed|failed|error" "$OUT/gpu_tests_engine.log" | tail -8
s=$(date +%s)
timeout 90 python3 -m pytest -q -p no:cacheprovider -rfE \
  "$R"/tests/test_kernels_attention.py -k long_context > "$OUT/gpu_tests_attn.log" 2>&1
echo "pytest attention long_context rc=$? [$(( $(date +%s) - s )) s]"
grep -E "passed|failed|error" "$OUT/gpu_tests_attn.log" | tail -8
while pgrep -f resolve_model >/dev/null; do sleep 2; done; cat "$OUT/models.log"
cd "$R" && s=$(date +%s)
bash scripts/compare_llamacpp.sh part1 > "$OUT/part1.log" 2>&1
echo "part1 rc=$? [$(( $(date +%s) - s )) s]"; tail -5 "$OUT/part1.log"
