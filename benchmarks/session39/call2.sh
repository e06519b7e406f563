#!/usr/bin/env bash
# Session 39 call 2 (warm, after call 1; e3b6b49: the step-ahead variant reverted): waits for
# the llama.cpp build of call 1, then llama3-8b-q4_k_m against it (compare_llamacpp.sh part2).
R=$PWD; t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 200 bash scripts/compare_llamacpp.sh part1 > $OUT/part1.log 2>&1; tail -3 $OUT/part1.log
t timeout 380 bash scripts/compare_llamacpp.sh part2 > $OUT/part2.log 2>&1; tail -24 $OUT/part2.log
