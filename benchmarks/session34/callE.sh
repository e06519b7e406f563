#!/usr/bin/env bash
# Session 34 call E (right after call D, same machine; run as this one command line): every
# kernel test file on the GPU.
R=$PWD; source scripts/device_setup.sh; s=$(date +%s)
timeout 490 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_kernels_*.py > $OUT/gpu_tests_kernels.log 2>&1
echo "rc=$? [$(( $(date +%s) - s )) s]"
grep -E "passed|failed|error" $OUT/gpu_tests_kernels.log | tail -10
