#!/usr/bin/env bash
# Session 33 call 7: int8 KV widened with a bias (WIDEN 2) against the exact widening (WIDEN 1,
# the old package: `scripts/ab_versions.sh --pack f3ae216`). The GPU attention tests of the
# widening first, then llama2-7b-q4_0 with int8 KV at depth 0 / 4,096 / 16,384, old and new.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
(python3 -c "
from localllm.bench.models import resolve_model
print(resolve_model('llama2-7b-q4_0'))" > "$OUT/models.log" 2>&1 &)
s=$(date +%s)
timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE "$R"/tests/test_kernels_attention.py \
  -k "widen or bias or long_context or realistic" > "$OUT/gpu_tests.log" 2>&1
echo "pytest rc=$? [$(( $(date +%s) - s )) s]"
grep -E "passed|failed|error|Error" "$OUT/gpu_tests.log" | tail -8
while pgrep -f resolve_model >/dev/null; do sleep 2; done; cat "$OUT/models.log"
s=$(date +%s)
bash "$R"/scripts/ab_versions.sh 1 "timeout 120 python3 -m localllm.cli bench --model llama2-7b-q4_0 \
  --scenario kv --kv-types int8 -p 0 -n 128 -d 0,4096,16384 -r 3" > "$OUT/ab_widen.log" 2>&1
echo "ab rc=$? [$(( $(date +%s) - s )) s]"
grep -E "===|│ int8" "$OUT/ab_widen.log"
