#!/usr/bin/env bash
# Needs benchmarks/session35/norm_fusion.patch applied (LOCALLLM_FUSED_NORM, the fused op);
# calls 3-5 ran variants of it (BENCHMARKS.md, session 35).
# Session 35 call 3: the projection + residual add + RMSNorm fusion (column-form int8
# activations, the norm's factor pending until the next GEMV) end to end, fusion off / on in
# turn (LOCALLLM_FUSED_NORM), both models, tg128 at depth 0 and 4,096; then its GPU tests.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama2-7b-q4_0', 'llama3-8b-q4_k_m'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1
for m in llama2-7b-q4_0 llama3-8b-q4_k_m; do
  rounds="0 1 0 1"; [ $m = llama3-8b-q4_k_m ] && rounds="0 1"
  for f in $rounds; do
    echo "== $m LOCALLLM_FUSED_NORM=$f"
    LOCALLLM_FUSED_NORM=$f timeout 200 python3 -m localllm.cli bench --model $m --scenario tg \
      -p 0 -n 128 -d 0,4096 -r 3 --json "$OUT/ab_${m}_$f.json" > "$OUT/ab_${m}_$f.log" 2>&1
    grep -E "tg128|tok/s" "$OUT/ab_${m}_$f.log" | tail -4
  done
done
t timeout 240 python3 -m pytest -q -p no:cacheprovider -rfE "$R"/tests/test_kernels_linear_norm.py \
  "$R"/tests/test_kernels_qkv_rope.py > "$OUT/gpu_tests_kernels.log" 2>&1
grep -E "passed|failed|error" "$OUT/gpu_tests_kernels.log" | tail -6
