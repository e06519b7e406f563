#!/usr/bin/env bash
# Prepared in session 42 for the next session's first call (fresh machine; carry .whl,
# .carry/testdata, .carry/COMMIT and .carry/old packed from 25f08e9: `bash scripts/ab_versions.sh
# --pack 25f08e9`): the stream-K dispatch at 65-128 rows (Q4_0 past one wave, Q6_K; session 42
# timed the kernels alone, not the engine) end to end, 25f08e9 (old: the plain grid) against
# this tree (new), the turn after a cached prefix (a 128-row prefill graph) on both models.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 150 python3 -c "
from localllm.bench.models import resolve_model
print(resolve_model('llama2-7b-q4_0')); print(resolve_model('llama3-8b-q4_k_m'))" > "$OUT/models.log" 2>&1
for m in llama2-7b-q4_0 llama3-8b-q4_k_m; do
  (cd "$R" && AB_WARMUP=1 t timeout 220 bash scripts/ab_versions.sh 2 python3 -m localllm.cli bench \
    --model $m --scenario prefix -p 0 -r 5) > "$OUT/ab_prefix_$m.log" 2>&1
  grep -E "^=== |│ 3900|rc=" "$OUT/ab_prefix_$m.log"
done
