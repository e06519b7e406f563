#!/usr/bin/env bash
# Session 37 call 5 (fresh machine): mixed steps chained (this tree) against b75942a (not
# chained), inter-token latency of 8 streams while an 8,000-token prompt prefills, 3 runs
# each (`bench --itl-test -r 3`), new first as warm-up (compiles), then old, new; then the
# GPU tests of step overlap (the new mixed-graph test and the plain-step one).
set -uo pipefail
R=$PWD
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
AB_WARMUP=1 t timeout 290 bash scripts/ab_versions.sh 1 python3 -m localllm.cli bench \
  --model llama3-8b-q4_k_m -p 0 -n 0 --itl-test -r 3 --json '$OUT/itl_$AB_TAG.json' > "$OUT/ab_itl.log" 2>&1
grep -E "===|│ 8 " "$OUT/ab_itl.log"
source scripts/device_setup.sh
t timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  -k "mixed or step_overlap" > "$OUT/gpu_tests_overlap.log" 2>&1
tail -4 "$OUT/gpu_tests_overlap.log"
