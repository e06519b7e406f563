#!/usr/bin/env bash
# Needs benchmarks/session35/norm_fusion.patch applied (LOCALLLM_FUSED_NORM, the fused op);
# calls 3-5 ran variants of it (BENCHMARKS.md, session 35).
# Session 35 call 4: what removing the one-row RMSNorm launches gives today (the fusion bound,
# scripts/probe_fusion_bound.py, norms composed), beside the unfused baseline and the fused
# projection + norm (call 3's variant), one process each, tg128 at depth 0, both models.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
for m in llama2-7b-q4_0 llama3-8b-q4_k_m; do
  for v in base bound fused; do
    case $v in
      base) env=(LOCALLLM_FUSED_NORM=0); skip="" ;;
      bound) env=(LOCALLLM_FUSED_NORM=0); skip="norm" ;;
      fused) env=(LOCALLLM_FUSED_NORM=1); skip="" ;;
    esac
    echo "== $m $v"
    env "${env[@]}" timeout 150 python3 "$R"/scripts/probe_fusion_bound.py --skip "$skip" -- bench \
      --model $m --scenario tg -p 0 -n 128 -r 3 > "$OUT/bound_${m}_$v.log" 2>&1
    grep -E "tg128" "$OUT/bound_${m}_$v.log" | tail -2
  done
done
