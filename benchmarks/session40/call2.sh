#!/usr/bin/env bash
# Session 40 call 2: what launching a captured CUDA graph costs the host, per graph
# (scripts/probe_graph_launch.py: split into parts, the new default, against one graph a step,
# and one graph without PDL); the turn after a cached 3,900-token prefix with one graph a step
# and with split graphs (probe_prefill.py, alternating); the GPU tests of the split capture.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh >/dev/null
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 100 python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama3-8b-q4_k_m', 'llama2-7b-q4_0'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1
for mode in "1 1" "0 1" "0 0"; do
  set -- $mode
  echo "== LOCALLLM_GRAPH_SPLIT=$1 LOCALLLM_PDL=$2"
  LOCALLLM_GRAPH_SPLIT=$1 LOCALLLM_PDL=$2 t timeout 150 python3 "$R"/scripts/probe_graph_launch.py \
    --model llama3-8b-q4_k_m --max-num-seqs 4 --reps 20 > "$OUT/launch_s$1_p$2.log" 2>&1
  grep -vE "^\s*$" "$OUT/launch_s$1_p$2.log" | grep -vE "Warning|warn" | head -30
done
for split in 0 1 0 1; do
  echo "== prefix turn, LOCALLLM_GRAPH_SPLIT=$split"
  LOCALLLM_GRAPH_SPLIT=$split t timeout 120 python3 "$R"/scripts/probe_prefill.py --model llama3-8b-q4_k_m \
    --cached 3900 --tokens 100 --runs 8 > "$OUT/prefix_s$split.log" 2>&1
  grep -E "wall ms|rc=" "$OUT/prefix_s$split.log"
done
t timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_gpu_engine.py \
  -k "split or prefill_graph or pdl or overlap" > $OUT/gpu_tests.log 2>&1; tail -n 3 $OUT/gpu_tests.log
