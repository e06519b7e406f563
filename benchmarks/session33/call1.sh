#!/usr/bin/env bash
# Session 33 call 1: long-context decode graphs (MHA over int8 KV scored by dp4a past
# plan.LONG_CONTEXT). llama.cpp builds in the background for call 2; the GPU tests of attention
# and of the engine's graphs; then llama2-7b-q4_0 with int8 KV at depth 0 / 4K / 8K / 16K, the
# old package (.carry/old, `scripts/ab_versions.sh --pack 21d2b3d`) against the working tree.
set -uo pipefail
R=$PWD
pgrep -f "llamacpp.sh build" >/dev/null || setsid nohup bash .carry/anchors/llamacpp.sh build > /tmp/lc-build.log 2>&1 &
source scripts/device_setup.sh
(python3 -c "
from localllm.bench.models import resolve_model
print(resolve_model('llama2-7b-q4_0'))" > "$OUT/models.log" 2>&1 &)
s=$(date +%s)
timeout 230 python3 -m pytest -q -p no:cacheprovider -rfE \
  "$R"/tests/test_gpu_engine.py "$R"/tests/test_kernels_attention.py \
  -k "long_context or realistic or cuda_graph or widen or mha or golden or pdl" > "$OUT/gpu_tests.log" 2>&1
echo "pytest rc=$? [$(( $(date +%s) - s )) s]"
grep -E "passed|failed|error" "$OUT/gpu_tests.log" | tail -8
while pgrep -f resolve_model >/dev/null; do sleep 2; done; cat "$OUT/models.log"
s=$(date +%s)
bash "$R"/scripts/ab_versions.sh 1 "timeout 150 python3 -m localllm.cli bench --model llama2-7b-q4_0 \
  --scenario kv --kv-types int8 -p 0 -n 128 -d 0,4096,8192,16384 -r 3" > "$OUT/ab_long.log" 2>&1
echo "ab rc=$? [$(( $(date +%s) - s )) s]"
grep -vE "^\s*$|it/s|%\|" "$OUT/ab_long.log" | tail -40
tail -2 /tmp/lc-build.log 2>/dev/null
