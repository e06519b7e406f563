#!/usr/bin/env bash
# Prepared in session 42 for the next session's second call (warm after next_call1.sh, same
# carry): 96 and 128 streams x (128 + 128) on llama2-7b-q4_0, whose QKV and gate+up GEMMs take
# the stream-K schedule at 65-128 rows since session 42, 25f08e9 (old) against this tree (new);
# then the GEMM GPU tests.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
(cd "$R" && t timeout 420 bash scripts/ab_versions.sh 2 python3 -m localllm.cli bench \
  --model llama2-7b-q4_0 --scenario serve --parallel 96,128 --parallel-prompt 128 --parallel-gen 128 \
  --requests 0 -r 2) > "$OUT/ab_streams.log" 2>&1
grep -E "^=== |rc=|tok/s|│ *(96|128) " "$OUT/ab_streams.log" | head -40
t timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_qlinear_mm.py \
  > "$OUT/gpu_mm.log" 2>&1; tail -n 2 "$OUT/gpu_mm.log"
