#!/usr/bin/env bash
# Session 35 call 2: what per-column activation scales cost the one-row dp4a GEMV
# (scripts/proto_col_scales.py: check on the GPU, then both group functions interleaved, two
# rounds), then the GPU tests of the long-context graph buckets and speculation on HEAD.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 120 python3 "$R"/scripts/proto_col_scales.py --check > "$OUT/col_check.log" 2>&1
tail -3 "$OUT/col_check.log"
t timeout 240 python3 "$R"/scripts/proto_col_scales.py --time > "$OUT/col_time.log" 2>&1
cat "$OUT/col_time.log" | cut -c1-260
t timeout 280 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_spec.py \
  "$R"/tests/test_gpu_engine.py -k "long or spec or price" > "$OUT/gpu_tests.log" 2>&1
grep -E "passed|failed|error" "$OUT/gpu_tests.log" | tail -6
