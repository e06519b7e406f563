#!/usr/bin/env bash
# Session 39 call 7 (warm): prefill-chunk attention partitions rounded down (this tree) against
# e3b6b49 (.carry/old, rounded up), one layer, the live plan (scripts/ab_attention.py under
# each package: old, new); the GPU tests of prefill / chunk attention; then llama2-7b's turn
# after a cached prefix, old then new, if time allows.
R=$PWD; t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 150 bash scripts/ab_versions.sh 1 python3 $R/scripts/ab_attention.py --models llama3-8b,llama2-7b \
  --kv fp16 --seqs 4000,8000 --q 24,112 --tag '$AB_TAG' > $OUT/ab_parts.log 2>&1
python3 -c "
import json
for l in open('$OUT/ab_attention.jsonl'):
    r=json.loads(l); print(r['tag'],r['model'],r['seq'],r['q'],'live',r['live_us'])"
source scripts/device_setup.sh >/dev/null
t timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_kernels_attention.py -k "prefill or chunk" > $OUT/gpu_tests_attention.log 2>&1; tail -n 3 $OUT/gpu_tests_attention.log
cd $R && t timeout 150 bash scripts/ab_versions.sh 1 python3 -m localllm.cli bench --model llama2-7b-q4_0 \
  --scenario prefix -p 0 -r 3 > $OUT/ab_prefix.log 2>&1; grep -E "===|│" $OUT/ab_prefix.log | grep -vE "━|─"
