#!/usr/bin/env bash
# Session 41 call 2 (warm machine after call 1): end to end, 13eabb9 (.carry/old: 16-token KV
# blocks, whole-block prefix cache) against this tree (64-token blocks, 16-token prefix-cache
# units), in turn, both models: tg128 at depth 0 / 4,096 / 16,384 (fp16 KV) and the turn after
# a cached 3,900-token prefix.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
for m in llama3-8b-q4_k_m llama2-7b-q4_0; do
  echo "== $m"
  (cd "$R" && t timeout 280 bash scripts/ab_versions.sh 1 python3 -m localllm.cli bench --model $m \
    --scenario tg,prefix -p 0 -n 128 -d 0,4096,16384 -r 3) > "$OUT/ab_$m.log" 2>&1
  grep -E "^=== |│ tg128|│ *prefix|cached|rc=" "$OUT/ab_$m.log" | grep -v "^In short" | cut -c1-220
done
