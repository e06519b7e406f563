#!/usr/bin/env bash
# session 28 call 1: the dp4a-score MHA int8 path (KDOT) A/B
set -uo pipefail
R=$PWD
nvidia-smi --query-gpu=name,driver_version,temperature.gpu --format=csv,noheader
# kernel: within the new package k0 (old path) / k1 / k2 and partition counts
source scripts/device_setup.sh
PYTHONPATH=$PYTHONPATH python3 $R/scripts/ab_attention.py --models llama2-7b --kv int8 --seqs 1024,4161,16513 --q 1 --parts 33 --variants k0,k2,k2p33,p33w8,n64 --tag kdot 2>&1 | tail -5
cd $R
bash scripts/ab_versions.sh 1 "python3 $R/scripts/ab_attention.py --models llama2-7b --kv int8 --seqs 1024,4161,16513 --q 1,5 --tag \$AB_TAG" 2>&1 | grep -v '^$'
bash scripts/ab_versions.sh 2 "python3 -m localllm.cli bench --model llama2-7b-q4_0 --scenario kv --kv-types int8 -p 0 -n 128 -r 3 --depth 0,4096,16384 2>&1 | grep -E '│ (tg|kv)'"
source scripts/device_setup.sh
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider "$R"/tests/test_kernels_attention.py 2>&1 | tail -3
