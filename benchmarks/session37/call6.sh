#!/usr/bin/env bash
# Session 37 call 6 (warm, after call 5; one command line): the mixed-graph GPU test with
# speculation off (call 5's run with speculation on matched outputs but ran half the chunks
# eagerly beside drafts, so its count of mixed-graph replays failed).
R=$PWD; source scripts/device_setup.sh >/dev/null
timeout 110 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu $R/tests/test_gpu_engine.py -k "mixed" > $OUT/gpu_test_mixed.log 2>&1
