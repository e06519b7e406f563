#!/usr/bin/env bash
# Session 38 call 4 (warm; one command line): the fused dequant-GEMM at 100 rows (the cached
# turn's prefill graph) against its one-knob neighbours, on llama3-8b's shapes.
R=$PWD; source scripts/device_setup.sh >/dev/null; cd $R && timeout 200 python3 scripts/probe_qmm.py --ts 100 --fmts q4_k,q6_k --shapes 6144x4096,4096x4096,28672x4096,4096x14336 --neighbours --budget 170 > $OUT/qmm_neighbours_t100.log 2>&1
