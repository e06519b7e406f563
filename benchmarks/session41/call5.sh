#!/usr/bin/env bash
# Session 41 call 5 (fresh machine): the copy of a partly matched block by one Triton launch (torch's
# strided copy split into 32 launches, call 4), its GPU tests, then the cached turn again,
# 13eabb9 (.carry/old: 16-token blocks) against this tree (64-token blocks), two rounds.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
(python3 -c "
from localllm.bench.models import resolve_model
print(resolve_model('llama3-8b-q4_k_m'))" > "$OUT/models.log" 2>&1 &)
t timeout 60 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_copy_slots.py \
  > "$OUT/gpu_copy.log" 2>&1; tail -n 2 "$OUT/gpu_copy.log"
t timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  -k "prefill_graph_for_short" > "$OUT/gpu_engine_prefix.log" 2>&1; tail -n 2 "$OUT/gpu_engine_prefix.log"
(cd "$R" && AB_WARMUP=1 t timeout 230 bash scripts/ab_versions.sh 2 python3 -m localllm.cli bench \
  --model llama3-8b-q4_k_m --scenario prefix -p 0 -r 5) > "$OUT/ab_prefix.log" 2>&1
grep -E "^=== |│ 3900|rc=" "$OUT/ab_prefix.log"
