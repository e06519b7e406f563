#!/usr/bin/env bash
# Session 38 call 6 (warm, right after call 5; one command line): two more old / new rounds of
# pp512, pp4096 and the cached-prefix turn, 5 runs each (old = e7d1c49, new = 4bc9787).
source scripts/device_setup.sh >/dev/null; cd $LOCALLLM_REPO && timeout 200 bash scripts/ab_versions.sh 2 python3 -m localllm.cli bench --model llama3-8b-q4_k_m --scenario pp,prefix -p 512,4096 -r 5 > $OUT/ab2.log 2>&1
