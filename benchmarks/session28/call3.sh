#!/usr/bin/env bash
# session 28 call 3: KDOT behind a runtime context switch (KDOT_MIN_CONTEXT), 64-token plans
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
nvidia-smi --query-gpu=name,temperature.gpu --format=csv,noheader
python3 $R/scripts/ab_attention.py --models llama2-7b --kv int8 --seqs 129,1024,4161,8192,16513 --q 1 --variants k0,m0,m0k2,m0s2,m0n128 --tag kdot3 2>&1 | tail -5
cd $R
bash scripts/ab_versions.sh 1 "python3 -m localllm.cli bench --model llama2-7b-q4_0 --scenario kv --kv-types int8 -p 0 -n 128 -r 3 --depth 0,4096,8192,16384 2>&1 | grep -E '│ int8'"
source scripts/device_setup.sh
timeout 220 python3 -m pytest -q -m gpu -p no:cacheprovider "$R"/tests/test_kernels_attention.py 2>&1 | tail -3
