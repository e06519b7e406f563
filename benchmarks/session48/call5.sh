#!/usr/bin/env bash
# Session 48's next call, not run (no device time left): carry .whl, .carry/old (before the call:
# `bash scripts/ab_versions.sh --pack 0c3ef7a`, the package before the change) and .carry/COMMIT
# (`bash scripts/stamp_commit.sh`). Prefill-chunk attention in a CUDA graph planned for a long
# window (b261384, eb03dcf: the live context spread over the launch's KV partitions).
# 1) the kernel, old against new, one layer with its merge, the cached turn's shape (112 query
# tokens over 4,000 cached ones) planned for the live context and for a 32K window; 2) the
# attention tests of the new code on the GPU (the prefill ones, incl. the window test, which is
# not gpu-marked and runs on CUDA where there is one); 3) with the time left, the cached turn end
# to end in a 32K window, old against new.
set -uo pipefail
R=$PWD
start=$(date +%s)
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
left() { echo $(( ${CALL_S:-380} - ($(date +%s) - start) )); }
t timeout 130 bash scripts/ab_versions.sh 1 python3 "$R"/scripts/ab_attention.py --models llama3-8b,llama2-7b \
  --kv fp16 --seqs 4000 --q 112,24 --window 32768 --block-size 64 --tag '$AB_TAG' > "$OUT/ab_attention.log" 2>&1
grep -E "^\{|===" "$OUT/ab_attention.log" | cut -c1-260
( source scripts/device_setup.sh
  t timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE "$R"/tests/test_kernels_attention.py \
    -k "prefill or window or pages_holding or decode_realistic" > "$OUT/gpu_attention.log" 2>&1; tail -n 2 "$OUT/gpu_attention.log" )
cd "$R"
l=$(left); [ "$l" -gt 60 ] || { echo "no time for the end-to-end turn"; exit 0; }
t timeout $(( l - 5 )) bash scripts/ab_versions.sh 1 python3 -m localllm.cli bench --model llama3-8b-q4_k_m \
  --scenario prefix -p 0 -r 3 --max-model-len 32768 > "$OUT/prefix_32k.log" 2>&1
grep -E "===|│ 3900|rror" "$OUT/prefix_32k.log"
