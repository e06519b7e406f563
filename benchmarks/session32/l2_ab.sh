#!/usr/bin/env bash
# Session 32: decode attention asks L2 for its first KV tiles before its PDL wait
# (LOCALLLM_ATTN_L2_TILES), A/B end to end in one process per variant, interleaved.
#   bash benchmarks/session32/l2_ab.sh MODEL "TILES..." ROUNDS [build]
# Results under $OUT/l2_ab_MODEL.log; with "build", llama.cpp builds in the background first.
set -uo pipefail
model=$1; tiles=$2; rounds=${3:-2}
if [ "${4:-}" = build ] && ! pgrep -f "llamacpp.sh build" >/dev/null; then
  setsid nohup bash .carry/anchors/llamacpp.sh build > /tmp/lc-build.log 2>&1 &
fi
source scripts/device_setup.sh
log=$OUT/l2_ab_$model.log
python3 -c "
from localllm.bench.models import resolve_model
print('$model', resolve_model('$model'))" >> "$log" 2>&1
for r in $(seq 1 "$rounds"); do
  for t in $tiles; do
    s=$(date +%s)
    echo "=== round $r LOCALLLM_ATTN_L2_TILES=$t" >> "$log"
    LOCALLLM_ATTN_L2_TILES=$t timeout 200 python3 -m localllm.cli bench --model "$model" \
      --scenario tg -p 0 -n 128 -d 0,4096,16384 -r 3 >> "$log" 2>&1
    echo "=== rc=$? [$(( $(date +%s) - s )) s]" >> "$log"
  done
done
grep -E "===|tg128|tok/s" "$log" | tail -60
tail -2 /tmp/lc-build.log 2>/dev/null
