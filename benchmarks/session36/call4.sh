#!/usr/bin/env bash
# Session 36 call 4: the kept targets at 64-token blocks (then the default, e12eeba) and at 16 (the
# prefix cache reuses whole blocks: 3,840 of a 3,900-token prefix instead of 3,888), then the
# engine's GPU tests at the default of that commit (64).
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
for bs in 64 16; do
  echo "== block $bs"
  t timeout 120 python3 -m localllm.cli bench --model llama3-8b-q4_k_m -p 0 -n 0 --prefix-test \
    --itl-test -r 3 --block-size $bs --json "$OUT/kept_$bs.json" > "$OUT/kept_$bs.log" 2>&1
  grep -E "│" "$OUT/kept_$bs.log" | grep -vE "━|─" | tail -6
done
t timeout 330 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  "$R"/tests/test_gpu_spec.py > "$OUT/gpu_tests_engine.log" 2>&1
tail -4 "$OUT/gpu_tests_engine.log"
