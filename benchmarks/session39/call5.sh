#!/usr/bin/env bash
# Session 39 call 5 (warm; run as one command line): prefill-chunk attention over fp16 KV, the
# live plan (3 stages) against 2 stages and 8 / 16 forced partitions, both models; the GPU
# tests of the fused GEMM.
R=$PWD; source scripts/device_setup.sh >/dev/null; cd $R; timeout 200 python3 scripts/ab_attention.py --models llama3-8b,llama2-7b --kv fp16 --seqs 4000,8000 --q 24,112 --variants s2,p8,p16,s2p8 > $OUT/ab_attention.log 2>&1; echo rc=$?; tail -n 30 $OUT/ab_attention.log; cd /tmp/run; timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_kernels_qlinear_mm.py > $OUT/gpu_tests_mm.log 2>&1; echo rc=$?; tail -n 4 $OUT/gpu_tests_mm.log
