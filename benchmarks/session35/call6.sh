#!/usr/bin/env bash
# Needs benchmarks/session35/norm_fusion.patch applied to 772f1a5's kernels (the
# session-35 fusion with the early loads as plain loads: sm_90 SASS keeps them right after the
# PDL wait, and the sums of squares are reduced after the K loop).
# Session 35 call 6: llama2-7b-q4_0 tg128, fused / unfused / fused, one process each.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
for v in fused base fused; do
  f=1; [ $v = base ] && f=0
  echo "== llama2-7b-q4_0 $v"
  LOCALLLM_FUSED_NORM=$f timeout 110 python3 -m localllm.cli bench --model llama2-7b-q4_0 \
    --scenario tg -p 0 -n 128 -d 0 -r 3 > "$OUT/e2e_llama2_$v.log" 2>&1
  grep -E "│ tg128" "$OUT/e2e_llama2_$v.log" | tail -1
done
