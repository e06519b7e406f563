#!/usr/bin/env bash
# Session 45, call 6 (short device time; carry .whl, .carry/testdata, .carry/COMMIT): the turn
# after a cached 3,900-token prefix on this tree only (stream-K from 0.7 to 2 waves for Q4_0,
# Q4_K and Q6_K), llama3-8b Q4_K_M and llama2-7b Q4_0, then both again (the first compiles).
# The cached / cold ratio is within one run, so no old tree is needed for the target.
set -uo pipefail
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
for r in 1 2; do
  for m in llama3-8b-q4_k_m llama2-7b-q4_0; do
    t timeout 150 python3 -m localllm.cli bench --model $m --scenario prefix -p 0 -r 5 \
      > "$OUT/prefix_${m}_$r.log" 2>&1
    grep -E "│ 3900|rc=|rror" "$OUT/prefix_${m}_$r.log" | tail -n 3
  done
done
