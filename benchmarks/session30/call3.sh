#!/usr/bin/env bash
# Session 30 call 3 (issue 15): SmolLM2-135M-Instruct (Q4_1), joined from calls 1 and 2's parts in
# /tmp/smol and this call's third part: batch-1 speedups at k = 4, 8 and at the engine's own
# limit (each prompt off and on three times in turn, each keeping its fastest run), 32 streams.
set -uo pipefail
R=$PWD
F=/tmp/smol/SmolLM2-135M-Instruct.Q4_1.gguf
cat /tmp/smol/smol_a /tmp/smol/smol_b .carry/smol_c > $F
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $F" | sha256sum -c || exit 1
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "[$(( $(date +%s) - s )) s]"; }
t timeout 200 python3 "$R"/scripts/spec_measure.py --skip-cost --pycode /nonexistent --smollm2 $F \
  --ks 4,8 --streams 32 --stream-gen 64 --repeats 3 --out "$OUT"/fixed
t timeout 170 python3 "$R"/scripts/spec_measure.py --skip-cost --pycode /nonexistent --smollm2 $F \
  --auto --streams 32 --stream-gen 64 --repeats 3 --out "$OUT"/auto
