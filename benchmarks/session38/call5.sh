#!/usr/bin/env bash
# Session 38 call 5 (fresh machine): 3-stage prefill attention over float KV (this commit)
# against e7d1c49 (.carry/old): pp512, pp4096, the cached-prefix turn and the inter-token
# latency under a long prefill, after one warm-up run of the new package; then the GPU
# attention tests of prefill chunks.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh >/dev/null
python3 -c "from localllm.bench.models import resolve_model; resolve_model('llama3-8b-q4_k_m')" > /dev/null 2>&1
cd "$R" && AB_WARMUP=1 timeout 330 bash scripts/ab_versions.sh 1 python3 -m localllm.cli bench \
  --model llama3-8b-q4_k_m --scenario pp,prefix,itl -p 512,4096 -r 3 > "$OUT/ab.log" 2>&1
echo "ab rc=$?"; grep -E "===|pp512|pp4096|3900|ratio|×|x " "$OUT/ab.log" | grep -v "━" | head -40
source scripts/device_setup.sh >/dev/null
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_attention.py \
  -k "prefill or chunk" > "$OUT/gpu_tests_attention.log" 2>&1
echo "tests rc=$?"; tail -n 3 "$OUT/gpu_tests_attention.log"
