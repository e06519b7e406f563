#!/usr/bin/env bash
# Session 37 call 3 (warm, after call 2; run as one command line): llama2-7b-q4_0 against
# llama.cpp and the table of both files; a no-PDL profile of the cached turn (it spent its 60 s
# limit compiling the kernels without PDL; call 4 reran it); the engine / speculation GPU tests.
cd $PWD; t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 260 bash scripts/compare_llamacpp.sh part3 > $OUT/part3.log 2>&1; tail -26 $OUT/part3.log
R=$PWD; source scripts/device_setup.sh
t timeout 60 env LOCALLLM_PDL=0 python3 $R/scripts/probe_prefill.py --model llama3-8b-q4_k_m --tokens 100 --cached 3900 --runs 5 > $OUT/probe_cached_turn_16_nopdl.log 2>&1
t timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_gpu_engine.py $R/tests/test_gpu_spec.py > $OUT/gpu_tests_engine.log 2>&1; tail -3 $OUT/gpu_tests_engine.log
