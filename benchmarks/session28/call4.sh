#!/usr/bin/env bash
# session 28 call 4: verify steps launched before their events are made (early launch), pycode-22m
set -uo pipefail
R=$PWD
bash scripts/ab_versions.sh 1 "python3 $R/scripts/spec_measure.py --skip-cost --smollm2 none --ks 4 --streams 8 --stream-gen 32 --gen 96 --out \$OUT/\$AB_TAG 2>&1 | grep -vE '^\s*$' | tail -14; python3 $R/scripts/probe_verify.py --model $R/.carry/testdata/models/pycode-22m-q4_k_m.gguf --ks 0,4 --steps 200 --out \$OUT/pv_\$AB_TAG 2>&1 | grep -E 'engine step|plain'"
source scripts/device_setup.sh
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider "$R"/tests/test_gpu_engine.py -k "overlap" 2>&1 | tail -2
