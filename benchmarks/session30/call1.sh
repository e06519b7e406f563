#!/usr/bin/env bash
# Session 30 call 1 (issue 15): speculation figures on the final code. The 8B verify cost at
# batch 1 (k = 4, 8) and pycode-22m's batch-1 speedups (k = 4, 8; each prompt off and on three
# times in turn, each keeping its fastest run) with 32 streams; then pycode-22m at the engine's
# own draft limit. Leaves the first part of the SmolLM2 file in /tmp/smol for call 2.
set -uo pipefail
R=$PWD
mkdir -p /tmp/smol && cp .carry/smol_a /tmp/smol/ &
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "[$(( $(date +%s) - s )) s]"; }
t timeout 300 python3 "$R"/scripts/spec_measure.py --batches 1 --smollm2 none --ks 4,8 \
  --streams 32 --stream-gen 64 --repeats 3 --out "$OUT"/fixed
t timeout 170 python3 "$R"/scripts/spec_measure.py --skip-cost --smollm2 none --auto \
  --streams 32 --stream-gen 64 --repeats 3 --out "$OUT"/auto
wait
ls -l /tmp/smol
