#!/usr/bin/env bash
# Session 40 call 3 (fresh machine): the GPU tests of this tree (engine + speculation: prefill
# graphs now start a padded chunk's query rows at its first real row); then the turn after a
# cached 3,900-token prefix, 19e3348 (.carry/old, the session's start) against this tree
# (host work before the first token cut, padding rows out of prefill attention), both models.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh >/dev/null
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 100 python3 -c "
from localllm.bench.models import resolve_model
for m in ('llama3-8b-q4_k_m', 'llama2-7b-q4_0'):
    print(m, resolve_model(m))" > "$OUT/models.log" 2>&1
t timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_gpu_engine.py \
  $R/tests/test_gpu_spec.py > $OUT/gpu_tests.log 2>&1; tail -n 4 $OUT/gpu_tests.log
for m in llama3-8b-q4_k_m llama2-7b-q4_0; do
  cd "$R" && t timeout 95 bash scripts/ab_versions.sh 1 python3 -m localllm.cli bench --model $m \
    --scenario prefix -p 0 -r 5 > "$OUT/ab_prefix_$m.log" 2>&1
  grep -E "===|│" "$OUT/ab_prefix_$m.log" | grep -vE "━|─"
done
