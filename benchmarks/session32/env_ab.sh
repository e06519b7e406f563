#!/usr/bin/env bash
# Session 32: end-to-end A/B of an experiment switched by an environment variable, one
# process per variant, interleaved (call 1: LOCALLLM_ATTN_L2_TILES, decode attention asking L2
# for its first KV tiles before its PDL wait; call 2: LOCALLLM_ATTN_MERGE_PARTS, the
# partitions the in-kernel merge reads per round trip).
#   [VAR=LOCALLLM_ATTN_L2_TILES] bash benchmarks/session32/env_ab.sh MODEL "VALUES..." ROUNDS [build]
# Results under $OUT/ab_VAR_MODEL.log; with "build", llama.cpp builds in the background first.
set -uo pipefail
model=$1; values=$2; rounds=${3:-2}; var=${VAR:-LOCALLLM_ATTN_L2_TILES}
if [ "${4:-}" = build ] && ! pgrep -f "llamacpp.sh build" >/dev/null; then
  setsid nohup bash .carry/anchors/llamacpp.sh build > /tmp/lc-build.log 2>&1 &
fi
source scripts/device_setup.sh
log=$OUT/ab_${var}_$model.log
python3 -c "
from localllm.bench.models import resolve_model
print('$model', resolve_model('$model'))" >> "$log" 2>&1
for r in $(seq 1 "$rounds"); do
  for t in $values; do
    s=$(date +%s)
    echo "=== round $r $var=$t" >> "$log"
    env "$var=$t" timeout 200 python3 -m localllm.cli bench --model "$model" \
      --scenario tg -p 0 -n 128 -d 0,4096,16384 -r 3 >> "$log" 2>&1
    echo "=== rc=$? [$(( $(date +%s) - s )) s]" >> "$log"
  done
done
grep -E "===|tg128|tok/s" "$log" | tail -60
tail -2 /tmp/lc-build.log 2>/dev/null || true  # the build, when one runs
