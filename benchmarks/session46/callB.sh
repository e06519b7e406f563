#!/usr/bin/env bash
# Session 46, call B (carry .whl, .carry/anchors, .carry/llamacpp-bin.tar.xz, .carry/COMMIT): the
# ratio table of issue 16 on the final tree, both engines on both files in this one call.
# llama.cpp's anchor build was made off the GPU machine (`scripts/llamacpp_prebuilt.sh build 90`,
# then `pack`) and is unpacked where compare_llamacpp.sh looks (so no part1; each part writes its synthetic
# model); part3 then part2 measure llama2-7b Q4_0 / llama3-8b Q4_K_M (llama2 first: most of the
# missed targets are its) and print the table of both.
# With time left, the turn after a cached 3,900-token prefix (llama2-7b Q4_0, then llama3-8b).
set -uo pipefail
start=$(date +%s)
R=$PWD
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t bash scripts/llamacpp_prebuilt.sh unpack
t timeout 270 bash scripts/compare_llamacpp.sh part3 > "$OUT/part3.log" 2>&1; tail -n 3 "$OUT/part3.log"
t timeout 270 bash scripts/compare_llamacpp.sh part2 > "$OUT/part2.log" 2>&1; tail -n 30 "$OUT/part2.log"
cd "$R" && source scripts/device_setup.sh >/dev/null
for m in llama2-7b-q4_0 llama3-8b-q4_k_m; do
  left=$(( ${CALL_S:-590} - ($(date +%s) - start) ))
  [ $left -gt 40 ] || { echo "no time left for the prefix turn of $m"; continue; }
  t timeout $(( left - 5 )) python3 -m localllm.cli bench --model $m --scenario prefix -p 0 -r 5 \
    > "$OUT/prefix_$m.log" 2>&1
  grep -E "│ 3900|rc=|rror" "$OUT/prefix_$m.log" | tail -n 3
done
