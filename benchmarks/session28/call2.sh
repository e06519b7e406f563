#!/usr/bin/env bash
# session 28 call 2: KDOT in the engine's kernel vs the prototype, pipeline stages
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
nvidia-smi --query-gpu=name,temperature.gpu --format=csv,noheader
python3 $R/scripts/proto_mha_dp4a.py --seqs 1024,4161,16513 --bns 128 --parts 8,16,33 --stages 0,1,2 2>&1 | grep -v '^$' | tail -60
python3 $R/scripts/ab_attention.py --models llama2-7b --kv int8 --seqs 1024,4161,16513 --q 1 --variants k0,k1s2,k1s3,k2s2,k2s3,k1s2p33,k1s2n64,k0s2 --tag kdot2 2>&1 | tail -3
cd $R
bash scripts/ab_versions.sh 1 "python3 -m localllm.cli bench --model llama2-7b-q4_0 --scenario kv --kv-types int8 -p 0 -n 128 -r 3 --depth 0,4096,16384 2>&1 | grep -E '│ int8'"
