#!/usr/bin/env bash
# Session 35 call 1: the whole-group producer GEMV prototype (scripts/proto_norm_producer.py):
# correctness on the GPU, then CUDA-graph chains against the engine's GEMV + add_rms_norm.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 120 python3 "$R"/scripts/proto_norm_producer.py --check > "$OUT/check.log" 2>&1
tail -3 "$OUT/check.log"
t timeout 400 python3 "$R"/scripts/proto_norm_producer.py --time --layers 16 \
  --configs 4:4:0,4:4:1,8:4:0,2:4:0,4:2:0,8:2:0,4:8:0,8:8:0 > "$OUT/time.log" 2>&1
cat "$OUT/time.log" | cut -c1-220
