#!/usr/bin/env bash
# Session 33 call 2 (right after call 1, on the same machine): both engines side by side on
# llama2-7b-q4_0 with int8 KV at depth 0 / 4,096 / 16,384 (`localllm bench --compare`; llama.cpp
# -ctk/-ctv q8_0, built in call 1), from the working tree.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
bin=/tmp/llamacpp-anchor/llama.cpp/b/bin
bash "$R"/.carry/anchors/llamacpp.sh wait
[ -x "$bin/llama-bench" ] || { echo "llama.cpp is not built: see /tmp/lc-build.log"; exit 1; }
s=$(date +%s)
timeout 500 python3 -m localllm.cli bench --model llama2-7b-q4_0 --scenario kv --kv-types int8 \
  -p 0 -n 128 --depth 0,4096,16384 -r 5 --compare "llama.cpp=$bin" \
  --json "$OUT/compare_kv_llama2.json" > "$OUT/compare_kv_llama2.log" 2>&1
echo "bench rc=$? [$(( $(date +%s) - s )) s]"
grep -vE "^\s*$|it/s" "$OUT/compare_kv_llama2.log" | tail -30
