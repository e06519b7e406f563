#!/usr/bin/env bash
# Session 45, call 5 (carry .whl, .carry/testdata, .carry/COMMIT, .carry/old2 packed from
# 25f08e9): the turn after a cached 3,900-token prefix on both models, 25f08e9 (old: the plain
# grid at 65-128 rows) against this tree (new: stream-K from 0.7 to 2 waves for Q4_0/Q4_K/Q6_K).
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
for m in llama3-8b-q4_k_m llama2-7b-q4_0; do
  t timeout 90 python3 -c "from localllm.bench.models import resolve_model; print(resolve_model('$m'))"
  (cd "$R" && AB_OLD=.carry/old2 AB_WARMUP=1 t timeout 180 bash scripts/ab_versions.sh 2 \
    python3 -m localllm.cli bench --model $m --scenario prefix -p 0 -r 5) > "$OUT/ab_prefix_$m.log" 2>&1
  grep -E "^=== |│ 3900|rc=" "$OUT/ab_prefix_$m.log"
done
