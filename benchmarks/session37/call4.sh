#!/usr/bin/env bash
# Session 37 call 4 (warm, after call 3; run as one command line): inter-token latency at
# --decode-prefill-chunk 16 and 12 (the default is 24), 3 runs each; the cached turn's
# profile without PDL (per-kernel times exact).
R=$PWD; source scripts/device_setup.sh; t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
for c in 16 12; do t timeout 60 python3 -m localllm.cli bench --model llama3-8b-q4_k_m -p 0 -n 0 --itl-test -r 3 --decode-prefill-chunk $c --json $OUT/itl_chunk$c.json > $OUT/itl_chunk$c.log 2>&1; done
t timeout 170 env LOCALLLM_PDL=0 python3 $R/scripts/probe_prefill.py --model llama3-8b-q4_k_m --tokens 100 --cached 3900 --runs 5 > $OUT/probe_cached_turn_16_nopdl.log 2>&1
