#!/usr/bin/env bash
# Session 39 call 1 (fresh machine): llama.cpp builds in the background (lowest priority) for
# the ratio table of calls 2-3; both synthetic models; the fused GEMM with the step-ahead
# decode (the dispatch of this tree: on from 17 rows, dropped where it spills) against the same
# tiles without it, per shape at 32/64/100/128 rows (`probe_qmm.py --configs`, weights from
# memory); then end to end against e3b6b49 (.carry/old, no step-ahead decode): the turn after a
# cached 3,900-token prefix and 32 / 64 streams x (128 + 128), a warm-up run, then old, new.
set -uo pipefail
R=$PWD
pgrep -f "llamacpp.sh build" >/dev/null || setsid nohup nice -n 19 bash .carry/anchors/llamacpp.sh build > /tmp/lc-build.log 2>&1 &
source scripts/device_setup.sh >/dev/null
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 150 python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama3-8b-q4_k_m', 'llama2-7b-q4_0'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1
t timeout 90 python3 "$R"/benchmarks/session39/ahead_pairs.py /tmp/pairs.jsonl > "$OUT/ahead_fitted.log" 2>&1
grep -c ahead "$OUT/ahead_fitted.log"; grep -E "Error|error" "$OUT/ahead_fitted.log" | head -3
t timeout 150 python3 "$R"/scripts/probe_qmm.py --configs /tmp/pairs.jsonl --warm 8 > "$OUT/ahead_pairs.log" 2>&1
cat "$OUT/ahead_pairs.log"
cd "$R" && AB_WARMUP=1 t timeout 240 bash scripts/ab_versions.sh 1 python3 -m localllm.cli bench \
  --model llama3-8b-q4_k_m --scenario prefix,serve -p 0 --parallel 32,64 --parallel-prompt 128 \
  --parallel-gen 128 --requests 0 -r 3 --json '$OUT/ab_$AB_TAG.json' > "$OUT/ab.log" 2>&1
grep -E "===|│" "$OUT/ab.log" | grep -vE "━|─" | head -40
tail -2 /tmp/lc-build.log
