#!/usr/bin/env bash
# Session 30 call 5 (issue 15): prompts indexed while they prefill (new = working tree) against
# ea63771 (old), pycode-22m grounded prompts at k = 0, 8, 12 (probe_spec_steps.py, old and new in
# turn, two rounds); then the new code with QUIET_STEPS 1, 2, 4 on all prompts; the GPU
# speculation / overlap tests.
set -uo pipefail
R=$PWD
M=$R/.carry/testdata/models/pycode-22m-q4_k_m.gguf
AB_WARMUP=1 bash scripts/ab_versions.sh 2 "cd $R/scripts && timeout 120 python3 probe_spec_steps.py --model $M --ks 0,8,12 --kind grounded --rounds 1 2>&1 | grep round"
source scripts/device_setup.sh
(cd "$R"/scripts && timeout 120 python3 probe_spec_steps.py --model $M --ks 0,8 --kind all --rounds 2 --quiet 1,2,4 2>&1 | grep round)
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider "$R"/tests/test_gpu_engine.py "$R"/tests/test_gpu_spec.py -k "overlap or spec or golden or current_stream" 2>&1 | tail -2
