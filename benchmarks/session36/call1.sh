#!/usr/bin/env bash
# Session 36 call 1: KV pages that hold whole KV tiles (one page read per tile, `_tile_pages`).
# Kernel alone (scripts/ab_attention.py): f835752's kernel at 16-token pages (.carry/old, packed
# by `bash scripts/ab_versions.sh --pack f835752`) against this tree's at 16 and 64; then
# llama3-8b-q4_k_m end to end, --block-size 16 / 64 in turn; then the GPU attention tests.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama3-8b-q4_k_m', 'llama2-7b-q4_0'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1 &
A="--seqs 129,4161,16513 --q 1,5 --kv fp16,int8"
t timeout 100 python3 "$R"/scripts/ab_attention.py $A --block-size 64 --tag new > "$OUT/ab_attn_new64.log" 2>&1
(cd "$R" && t timeout 200 bash scripts/ab_versions.sh 1 python3 "$R"/scripts/ab_attention.py $A \
  --block-size 16 --tag '$AB_TAG') > "$OUT/ab_attn_16.log" 2>&1
tail -1 "$OUT"/ab_attn_*.log
wait
for bs in 16 64 16 64; do
  echo "== llama3 block $bs"
  timeout 100 python3 -m localllm.cli bench --model llama3-8b-q4_k_m --scenario tg -p 0 -n 128 \
    -d 0,4096,16384 -r 3 --block-size $bs >> "$OUT/e2e_llama3_$bs.log" 2>&1
  grep -E "│ tg128" "$OUT/e2e_llama3_$bs.log" | tail -3
done
t timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_attention.py \
  > "$OUT/gpu_tests_attn.log" 2>&1
tail -3 "$OUT/gpu_tests_attn.log"
