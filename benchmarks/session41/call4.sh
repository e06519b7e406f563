#!/usr/bin/env bash
# Session 41 call 4: why the cached turn reads ~0.5 ms slower at 64-token blocks (call 3): the
# turn's per-kernel breakdown at 16 and at 64 (this tree), and its chunk attention alone.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
for b in 16 64 16 64; do
  echo "== block $b"
  t timeout 100 python3 "$R"/scripts/probe_prefill.py --model llama3-8b-q4_k_m --cached 3900 \
    --tokens 100 --runs 5 --block-size $b > "$OUT/probe_prefill_$b.log" 2>&1
  head -30 "$OUT/probe_prefill_$b.log"
done
t timeout 100 python3 "$R"/scripts/ab_attention.py --models llama3-8b,llama2-7b --kv fp16 --seqs 4000 \
  --q 112 --block-size 16 --tag b16 > "$OUT/attn16.log" 2>&1
t timeout 100 python3 "$R"/scripts/ab_attention.py --models llama3-8b,llama2-7b --kv fp16 --seqs 4000 \
  --q 112 --block-size 64 --tag b64 > "$OUT/attn64.log" 2>&1
cat "$OUT/attn16.log" "$OUT/attn64.log" | tail -12
