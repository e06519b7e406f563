#!/usr/bin/env bash
# Prepared in session 41 for the next session's second call (warm after next_call1.sh): the GPU
# tests of the engine and speculation on session 41's last code (the prefix cache as a trie of
# units, not GPU-run), then the attention tests.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 400 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  "$R"/tests/test_gpu_spec.py > "$OUT/gpu_engine_spec.log" 2>&1; tail -n 4 "$OUT/gpu_engine_spec.log"
t timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_attention.py \
  "$R"/tests/test_kernels_copy_slots.py "$R"/tests/test_kernels_qlinear_mm.py > "$OUT/gpu_attn.log" 2>&1
tail -n 3 "$OUT/gpu_attn.log"
