#!/usr/bin/env bash
# Session 46, call D (warm after the ratio table): the GPU tests of the final tree, the GEMMs
# first (every format's stream-K form) and then the engine and speculation (goldens, graphs,
# prefix cache, verify), whose first run compiles for minutes.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh >/dev/null
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_qlinear_mm.py \
  > "$OUT/gpu_mm.log" 2>&1; tail -n 2 "$OUT/gpu_mm.log"
t timeout ${ENGINE_S:-420} python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  "$R"/tests/test_gpu_spec.py > "$OUT/gpu_engine.log" 2>&1; tail -n 3 "$OUT/gpu_engine.log"
