#!/usr/bin/env bash
# Session 39 call 3 (warm, after call 2; e3b6b49): llama2-7b-q4_0 against llama.cpp and the
# table of both files (compare_llamacpp.sh part3); then the GPU tests of e3b6b49 (engine +
# speculation, attention kernels).
R=$PWD; t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 200 bash scripts/compare_llamacpp.sh part3 > $OUT/part3.log 2>&1; tail -28 $OUT/part3.log
source scripts/device_setup.sh >/dev/null
t timeout 250 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_gpu_engine.py $R/tests/test_gpu_spec.py > $OUT/gpu_tests_engine.log 2>&1; tail -n 4 $OUT/gpu_tests_engine.log
t timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_kernels_attention.py > $OUT/gpu_tests_attention.log 2>&1; tail -n 4 $OUT/gpu_tests_attention.log
