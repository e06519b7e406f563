#!/usr/bin/env bash
# localllm vs llama.cpp (issue 16): both engines on both synthetic files of ANCHORS.md, measured
# side by side by `localllm bench --compare`, and ONE ratio table (each figure with its ratio and
# its % of the bandwidth ceiling). On a GPU machine, from the repo root, with ../shared/anchors
# carried to .carry/anchors (and, without network, wheels in .whl/ and test data in .carry/testdata):
#
#   bash scripts/compare_llamacpp.sh part1   # llama.cpp build in the background (~7 min on 16
#                                            # cores), both synthetic models written meanwhile,
#                                            # then waits for the build
#   bash scripts/compare_llamacpp.sh part2   # llama3-8b-q4_k_m: both engines; prints the table
#   bash scripts/compare_llamacpp.sh part3   # llama2-7b-q4_0: both engines; prints the table of both
#   bash scripts/compare_llamacpp.sh table   # the table again (Markdown: $OUT/compare_table.md)
#   bash scripts/compare_llamacpp.sh all     # everything in one go (no per-command time limit)
#
# Each part stays inside a 10-minute command; run them back to back on one machine (the build,
# the models and the results live in /tmp). Measured per model: pp512, tg128 at depth 0, 4096
# and 16384 with fp16 KV (tg) and int8 KV (kv; llama.cpp -ctk/-ctv q8_0), 32 and 64 streams x
# (128 + 128) (serve; llama-batched-bench), 5 repetitions. Results under $OUT (or ./gpu-results):
# compare_MODEL.json and .log, plots_MODEL/ (when matplotlib is installed), compare_table.md.
set -uo pipefail
what=${1:-all}
source scripts/device_setup.sh
R=$LOCALLLM_REPO
OUT=${OUT:-$R/gpu-results}; mkdir -p "$OUT"
anchors=$R/.carry/anchors
bin=/tmp/llamacpp-anchor/llama.cpp/b/bin
res=/tmp/localllm-compare; mkdir -p "$res"
models=(llama3-8b-q4_k_m llama2-7b-q4_0)

part1() {
  [ -f "$anchors/llamacpp.sh" ] || { echo "missing $anchors/llamacpp.sh: carry ../shared/anchors to .carry/anchors"; exit 2; }
  if [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-batched-bench" ]; then
    echo "llama.cpp already built"
  elif pgrep -f "llamacpp.sh build" >/dev/null; then
    echo "llama.cpp build already running (started by an earlier command of this machine)"
  else
    setsid nohup bash "$anchors/llamacpp.sh" build > /tmp/lc-build.log 2>&1 &
  fi
  python3 -c "
from localllm.bench.models import resolve_model
for m in ('${models[0]}', '${models[1]}'):
    print(m, resolve_model(m))"
  bash "$anchors/llamacpp.sh" wait
  [ -x "$bin/llama-bench" ] || { echo "llama.cpp build failed: see /tmp/lc-build.log and /tmp/llamacpp-anchor/build.log"; exit 1; }
}

measure() {  # one model: localllm bench, then llama.cpp with matching settings, in this call
  local m=$1 plot=()
  [ -x "$bin/llama-bench" ] || { echo "llama.cpp is not built on this machine: run part1 first"; exit 2; }
  python3 -c "import matplotlib" 2>/dev/null && plot=(--plot "$OUT/plots_$m")
  if ! python3 -m localllm.cli bench --model "$m" --scenario pp,tg,serve,kv \
      -p 512 -n 128 --depth 0,4096,16384 --kv-types int8 -r 5 \
      --parallel 32,64 --parallel-prompt 128 --parallel-gen 128 --requests 0 \
      --compare "llama.cpp=$bin" --json "$res/compare_$m.json" "${plot[@]}" 2>&1 | tee "$OUT/compare_$m.log"; then
    echo "localllm bench failed for $m (log: $OUT/compare_$m.log)"; exit 1
  fi
  cp "$res/compare_$m.json" "$OUT/"
}

table() {
  local files=("$res"/compare_*.json)
  [ -e "${files[0]}" ] || { echo "no results in $res yet: run part2/part3"; exit 2; }
  python3 -m localllm.bench.llamacpp.ratio_table "${files[@]}"
  python3 -m localllm.bench.llamacpp.ratio_table --markdown "${files[@]}" > "$OUT/compare_table.md"
  echo "(Markdown table: $OUT/compare_table.md)"
}

case $what in
  part1) part1 ;;
  part2) measure "${models[0]}"; table ;;
  part3) measure "${models[1]}"; table ;;
  table) table ;;
  all) part1; measure "${models[0]}"; measure "${models[1]}"; table ;;
  *) sed -n '2,22p' "$0"; exit 2 ;;
esac
