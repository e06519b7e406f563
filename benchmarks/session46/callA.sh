#!/usr/bin/env bash
# Session 46, call A (fresh machine; carry .whl, .carry/testdata, .carry/COMMIT): the turn after a
# cached 3,900-token prefix on this tree (stream-K from 0.7 to 2 waves for Q4_0, Q4_K, Q6_K),
# llama3-8b Q4_K_M and llama2-7b Q4_0, twice (the first run compiles); then the GEMM GPU tests
# (every format's stream-K form). llama.cpp is not built here: call B carries a build made off
# the GPU machine (scripts/llamacpp_prebuilt.sh).
set -uo pipefail
source scripts/device_setup.sh >/dev/null
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 30 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for r in 1 2; do
  for m in llama3-8b-q4_k_m llama2-7b-q4_0; do
    t timeout 140 python3 -m localllm.cli bench --model $m --scenario prefix -p 0 -r 5 \
      > "$OUT/prefix_${m}_$r.log" 2>&1
    grep -E "│ 3900|rc=|rror" "$OUT/prefix_${m}_$r.log" | tail -n 3
  done
done
t timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$LOCALLLM_REPO"/tests/test_kernels_qlinear_mm.py \
  > "$OUT/gpu_mm.log" 2>&1; tail -n 2 "$OUT/gpu_mm.log"
