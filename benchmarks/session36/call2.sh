#!/usr/bin/env bash
# Session 36 call 2: end to end, f835752 at 16-token KV pages (.carry/old) against this tree at
# 64-token pages (one page read per KV tile), in turn, both models, fp16 and int8 KV; then the
# GPU tests of the page-per-tile path.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama3-8b-q4_k_m', 'llama2-7b-q4_0'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1
BS='$( [ "$AB_TAG" = old ] && echo 16 || echo 64 )'
for m in llama3-8b-q4_k_m llama2-7b-q4_0; do
  for kv in fp16 int8; do
    d=0,4096,16384; [ $kv = int8 ] && d=4096,16384
    echo "== $m $kv"
    (cd "$R" && timeout 150 bash scripts/ab_versions.sh 1 "python3 -m localllm.cli bench --model $m \
      --scenario tg -p 0 -n 128 -d $d -r 3 --kv-dtype $kv --block-size $BS") > "$OUT/e2e_${m}_$kv.log" 2>&1
    grep -E "^=== |│ tg128|localllm " "$OUT/e2e_${m}_$kv.log" | grep -v "^In short" | cut -c1-200
  done
done
t timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_attention.py \
  -k "whole_tiles or decode_realistic" > "$OUT/gpu_tests_attn.log" 2>&1
tail -3 "$OUT/gpu_tests_attn.log"
