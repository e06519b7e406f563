#!/usr/bin/env bash
# Session 39 call 6 (fresh machine; e3b6b49): prefill-chunk attention over a float KV cache at
# 3 stages (one 120 KB program per H200 SM), one layer, cold KV, over forced KV partition
# counts, to find the rule (call 5: 8 partitions beat the plan's 5 / 9 in six of eight cases).
R=$PWD; source scripts/device_setup.sh >/dev/null; cd $R
timeout 240 python3 scripts/ab_attention.py --models llama3-8b,llama2-7b --kv fp16 --seqs 4000,8000 \
  --q 24,112 --parts 3,4,6,8,9,10,12,16,24 > $OUT/parts_sweep.log 2>&1; echo rc=$?
