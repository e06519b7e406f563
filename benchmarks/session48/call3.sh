#!/usr/bin/env bash
# Session 48, call 3 (carry .whl, .carry/anchors, .carry/llamacpp-bin.tar.xz, .carry/COMMIT): on an
# H200, the ratio table of issue 16 (session 46's call B: llama.cpp built off the GPU machine,
# both engines on both files in this call, then the turn after a cached prefix). On another GPU
# (session 46 has this code's table on an H100): the turn after a cached 3,900-token prefix only,
# two rounds of five per model, to see how far its 10% target sits from its spread.
set -uo pipefail
R=$PWD
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  CALL_S=${CALL_S:-590} bash benchmarks/session46/callB.sh; exit
fi
source scripts/device_setup.sh
for m in llama3-8b-q4_k_m llama2-7b-q4_0; do
  for round in 1 2; do
    t timeout 200 python3 -m localllm.cli bench --model $m --scenario prefix -p 0 -r 5 \
      --json "$OUT/prefix_${m}_$round.json" > "$OUT/prefix_${m}_$round.log" 2>&1
    grep -E "│ 3900|rror" "$OUT/prefix_${m}_$round.log" | tail -n 2
  done
done
