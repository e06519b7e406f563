#!/usr/bin/env bash
# The measurement session 27 could not run (no device time left): the dp4a-score MHA int8 decode
# path of mha_int8_kdot.patch, built into `_attn_kernel`, against the kernel without it.
# Here (repo root, on the commit the patch was made on or a later one it applies to):
#   bash scripts/ab_versions.sh --pack HEAD && git apply benchmarks/session27/mha_int8_kdot.patch
#   bash scripts/stamp_commit.sh
# There (one call, carrying .whl and .carry; ~6 min with a fresh machine's synthetic model):
#   bash benchmarks/session27/mha_int8_kdot_next.sh
set -uo pipefail
R=$PWD
bash scripts/ab_versions.sh 1 "python3 $R/scripts/ab_attention.py --models llama2-7b --kv int8 --seqs 1024,4161,16513 --q 1 --tag \$AB_TAG"
bash scripts/ab_versions.sh 2 "python3 -m localllm.cli bench --model llama2-7b-q4_0 --scenario kv --kv-types int8 -p 0 -n 128 -r 3 --depth 0,4096,16384 2>&1 | grep -E '│ (tg|kv)'"
source scripts/device_setup.sh
python3 -m pytest -q -m gpu -p no:cacheprovider "$R"/tests/test_kernels_attention.py 2>&1 | tail -3
