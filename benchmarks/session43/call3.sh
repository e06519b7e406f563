#!/usr/bin/env bash
# Session 43, call 3 (warm after call 2): the GPU tests of the engine, speculation and the GEMMs
# on this tree (the stream-K dispatch and session 42's review commit had not run them).
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 420 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  "$R"/tests/test_gpu_spec.py > "$OUT/gpu_engine.log" 2>&1; tail -n 3 "$OUT/gpu_engine.log"
t timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_qlinear_mm.py \
  > "$OUT/gpu_mm.log" 2>&1; tail -n 2 "$OUT/gpu_mm.log"
