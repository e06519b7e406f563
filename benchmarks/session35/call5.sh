#!/usr/bin/env bash
# Needs benchmarks/session35/norm_fusion.patch applied (LOCALLLM_FUSED_NORM, the fused op);
# calls 3-5 ran variants of it (BENCHMARKS.md, session 35).
# Session 35 call 5: the fused projection + norm after moving the consumers' sums-of-squares
# load and the producer's residual load right after the PDL wait (volatile, reduced after the
# loop); base / bound (norm launches removed) / fused, one process each, tg128 at depth 0.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
for m in llama2-7b-q4_0 llama3-8b-q4_k_m; do
  for v in fused base bound fused; do
    case $v in
      base) env=(LOCALLLM_FUSED_NORM=0); skip="" ;;
      bound) env=(LOCALLLM_FUSED_NORM=0); skip="norm" ;;
      fused) env=(LOCALLLM_FUSED_NORM=1); skip="" ;;
    esac
    echo "== $m $v"
    env "${env[@]}" timeout 120 python3 "$R"/scripts/probe_fusion_bound.py --skip "$skip" -- bench \
      --model $m --scenario tg -p 0 -n 128 -d 0 -r 3 > "$OUT/e2e_${m}_$v.log" 2>&1
    grep -E "│ tg128" "$OUT/e2e_${m}_$v.log" | tail -1
  done
done
