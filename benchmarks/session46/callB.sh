#!/usr/bin/env bash
# Session 46, call B (warm after call A): the ratio table of issue 16 on the final tree, both
# engines on both files in this one call (`compare_llamacpp.sh part2`, then `part3`, which
# prints the table of both); waits first for llama.cpp's build if call A left it running.
set -uo pipefail
source scripts/device_setup.sh >/dev/null
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout ${WAIT_S:-120} bash .carry/anchors/llamacpp.sh wait > "$OUT/build_wait.log" 2>&1; tail -n 2 "$OUT/build_wait.log"
t timeout 270 bash scripts/compare_llamacpp.sh part2 > "$OUT/part2.log" 2>&1; tail -n 3 "$OUT/part2.log"
t timeout 270 bash scripts/compare_llamacpp.sh part3 > "$OUT/part3.log" 2>&1; tail -n 40 "$OUT/part3.log"
