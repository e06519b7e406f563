#!/usr/bin/env bash
# Session 40 call 1 (fresh machine): both synthetic models; where the turn after a cached
# 3,900-token prefix spends its wall time (scripts/probe_prefill.py --cached 3900 --tokens 100:
# per-kernel breakdown, then one turn as a CPU + CUDA Chrome trace and one under cProfile);
# then that turn end to end, e3b6b49 (.carry/old: prefill-chunk attention partitions rounded
# up) against this tree (rounded down, fb013ff), llama2-7b then llama3-8b.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh >/dev/null
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 150 python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama3-8b-q4_k_m', 'llama2-7b-q4_0'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1
t timeout 200 python3 "$R"/scripts/probe_prefill.py --model llama3-8b-q4_k_m --cached 3900 \
  --tokens 100 --runs 5 --trace "$OUT/turn_trace.json" > "$OUT/probe_prefill.log" 2>&1
head -40 "$OUT/probe_prefill.log"; gzip -f "$OUT/turn_trace.json"
for m in llama2-7b-q4_0 llama3-8b-q4_k_m; do
  cd "$R" && t timeout 130 bash scripts/ab_versions.sh 1 python3 -m localllm.cli bench --model $m \
    --scenario prefix -p 0 -r 5 > "$OUT/ab_prefix_$m.log" 2>&1
  grep -E "===|│" "$OUT/ab_prefix_$m.log" | grep -vE "━|─"
done
