#!/usr/bin/env bash
# Session 41 call 3 (warm after call 2): the cached turn A/B again (two rounds, llama3), then the GPU
# tests call 1 could not reach in its limits.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
(cd "$R" && t timeout 200 bash scripts/ab_versions.sh 2 python3 -m localllm.cli bench \
  --model llama3-8b-q4_k_m --scenario prefix -p 0 -r 5) > "$OUT/ab_prefix.log" 2>&1
grep -E "^=== |│ 3900|rc=" "$OUT/ab_prefix.log"
t timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_spec.py \
  -k bench_spec > "$OUT/gpu_bench_spec.log" 2>&1; tail -n 2 "$OUT/gpu_bench_spec.log"
t timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_attention.py \
  > "$OUT/gpu_attn.log" 2>&1; tail -n 3 "$OUT/gpu_attn.log"
