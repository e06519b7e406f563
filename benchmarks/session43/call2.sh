#!/usr/bin/env bash
# Session 43, call 2 (warm after call 1; carry also .carry/old2, packed from 25f08e9: the plain
# grid at 65-128 rows): the turn after a cached 3,900-token prefix (a 128-row prefill graph) on
# both models, 25f08e9 (old) against this tree (new: the stream-K dispatch with the
# owner-adds-partials fix-up).
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 150 python3 -c "
from localllm.bench.models import resolve_model
print(resolve_model('llama2-7b-q4_0')); print(resolve_model('llama3-8b-q4_k_m'))" > "$OUT/models.log" 2>&1
for m in llama2-7b-q4_0 llama3-8b-q4_k_m; do
  (cd "$R" && AB_OLD=.carry/old2 AB_WARMUP=1 t timeout 210 bash scripts/ab_versions.sh 2 \
    python3 -m localllm.cli bench --model $m --scenario prefix -p 0 -r 5) > "$OUT/ab_prefix_$m.log" 2>&1
  grep -E "^=== |│ 3900|rc=" "$OUT/ab_prefix_$m.log"
done
