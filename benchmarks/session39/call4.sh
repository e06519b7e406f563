#!/usr/bin/env bash
# Session 39 call 4 (warm, right after call 3, whose test runs ran out of time compiling; run as
# one command line): the GPU tests of e3b6b49 (engine + speculation, attention kernels).
R=$PWD; source scripts/device_setup.sh >/dev/null; timeout 330 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_gpu_engine.py $R/tests/test_gpu_spec.py > $OUT/gpu_tests_engine.log 2>&1; echo rc=$?; tail -n 4 $OUT/gpu_tests_engine.log; timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_kernels_attention.py > $OUT/gpu_tests_attention.log 2>&1; echo rc=$?; tail -n 4 $OUT/gpu_tests_attention.log
