#!/usr/bin/env bash
# Session 38 call 1 (fresh machine): synthetic models; PDL off vs on (LOCALLLM_PDL, each
# process captures its graphs under it) for pp512 and the turn after a cached 3,900-token
# prefix, alternating 0 1 0 1; then the GPU tests of the final code (attention kernels,
# engine, speculation).
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 100 python3 -c "
from localllm.bench.models import resolve_model
print(resolve_model('llama3-8b-q4_k_m'))" > "$OUT/models.log" 2>&1
cat "$OUT/models.log"
for i in 1 2; do for p in 0 1; do
  t timeout 90 env LOCALLLM_PDL=$p python3 -m localllm.cli bench --model llama3-8b-q4_k_m \
    --scenario pp,prefix -p 512 -r 5 --json "$OUT/pdl${p}_$i.json" > "$OUT/pdl${p}_$i.log" 2>&1
  echo "== PDL=$p run $i"; grep -E "│" "$OUT/pdl${p}_$i.log" | grep -vE "━|─" | tail -4
done; done
t timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_attention.py \
  > "$OUT/gpu_tests_attention.log" 2>&1
grep -E "passed|failed|error" "$OUT/gpu_tests_attention.log" | tail -6
t timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  "$R"/tests/test_gpu_spec.py > "$OUT/gpu_tests_engine.log" 2>&1
grep -E "passed|failed|error" "$OUT/gpu_tests_engine.log" | tail -6
