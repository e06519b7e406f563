#!/usr/bin/env bash
# Session 46, call A (fresh machine; carry .whl, .carry/testdata, .carry/anchors, .carry/COMMIT):
# llama.cpp builds in the background at the lowest priority for the ratio table (calls B, C);
# meanwhile the turn after a cached 3,900-token prefix on this tree (stream-K from 0.7 to 2 waves
# for Q4_0, Q4_K, Q6_K), llama3-8b Q4_K_M and llama2-7b Q4_0, twice (the first run compiles);
# the GEMM GPU tests (every format's stream-K form); then `compare_llamacpp.sh part1` waits for
# the build with the time left.
set -uo pipefail
pgrep -f "llamacpp.sh build" >/dev/null || setsid nohup nice -n 19 bash .carry/anchors/llamacpp.sh build > /tmp/lc-build.log 2>&1 &
source scripts/device_setup.sh >/dev/null
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
for r in 1 2; do
  for m in llama3-8b-q4_k_m llama2-7b-q4_0; do
    t timeout 140 python3 -m localllm.cli bench --model $m --scenario prefix -p 0 -r 5 \
      > "$OUT/prefix_${m}_$r.log" 2>&1
    grep -E "│ 3900|rc=|rror" "$OUT/prefix_${m}_$r.log" | tail -n 3
  done
done
t timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu tests/test_kernels_qlinear_mm.py \
  > "$OUT/gpu_mm.log" 2>&1; tail -n 2 "$OUT/gpu_mm.log"
t timeout 30 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t timeout ${PART1_S:-40} bash scripts/compare_llamacpp.sh part1 > "$OUT/part1.log" 2>&1; tail -n 3 "$OUT/part1.log"
tail -n 2 /tmp/lc-build.log
