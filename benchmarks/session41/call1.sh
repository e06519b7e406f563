#!/usr/bin/env bash
# Session 41 call 1 (fresh machine): the GPU tests of 64-token KV blocks with 16-token prefix-cache
# units (a hit ending inside a block copies that block's leading slots) while both synthetic
# models are written in the background for call 2.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
(python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama3-8b-q4_k_m', 'llama2-7b-q4_0'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1 &)
t timeout 420 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  "$R"/tests/test_gpu_spec.py > "$OUT/gpu_engine_spec.log" 2>&1
tail -n 4 "$OUT/gpu_engine_spec.log"
t timeout 130 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_attention.py \
  -k "pages_holding or decode_realistic" > "$OUT/gpu_attn.log" 2>&1
tail -n 3 "$OUT/gpu_attn.log"
cat "$OUT/models.log"
