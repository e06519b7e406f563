#!/usr/bin/env bash
# Session 37 call 2 (warm, after call 1): llama3-8b-q4_k_m against llama.cpp
# (`scripts/compare_llamacpp.sh part2`); then the kept targets (prefix cache, inter-token
# latency under a long prefill) at 16- and 64-token KV blocks, 5 repetitions each; then where
# the turn after a cached 3,900-token prefix goes (kernels, profiled).
set -uo pipefail
R=$PWD
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 240 bash scripts/compare_llamacpp.sh part2 > "$OUT/part2.log" 2>&1
tail -22 "$OUT/part2.log"
source scripts/device_setup.sh
for bs in 16 64; do
  echo "== block $bs"
  t timeout 120 python3 -m localllm.cli bench --model llama3-8b-q4_k_m -p 0 -n 0 --prefix-test \
    --itl-test -r 5 --block-size $bs --json "$OUT/kept_$bs.json" > "$OUT/kept_$bs.log" 2>&1
  grep -E "│" "$OUT/kept_$bs.log" | grep -vE "━|─" | tail -4
done
t timeout 80 python3 "$R"/scripts/probe_prefill.py --model llama3-8b-q4_k_m --tokens 100 \
  --cached 3900 --runs 5 > "$OUT/probe_cached_turn_16.log" 2>&1
head -40 "$OUT/probe_cached_turn_16.log"
