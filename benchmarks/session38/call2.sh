#!/usr/bin/env bash
# Session 38 call 2 (warm, right after call 1, whose tests ran out of time compiling; run as one
# command line): the GPU tests of e7d1c49 (engine + speculation, then attention kernels).
R=$PWD; source scripts/device_setup.sh >/dev/null; timeout 380 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_gpu_engine.py $R/tests/test_gpu_spec.py > $OUT/gpu_tests_engine.log 2>&1; echo rc=$?; tail -n 5 $OUT/gpu_tests_engine.log; timeout 180 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_kernels_attention.py > $OUT/gpu_tests_attention.log 2>&1; echo rc=$?; tail -n 5 $OUT/gpu_tests_attention.log
