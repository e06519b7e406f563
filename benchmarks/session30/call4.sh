#!/usr/bin/env bash
# Session 30 call 4 (issue 15): where a speculating pycode-22m request's time goes on real
# prompts, step kind by step kind (scripts/probe_spec_steps.py), grounded and open prompts.
set -uo pipefail
R=$PWD
M=$R/.carry/testdata/models/pycode-22m-q4_k_m.gguf
source scripts/device_setup.sh
cd "$R"/scripts
timeout 150 python3 probe_spec_steps.py --model $M --ks 0,8,12 --kind grounded --rounds 2
timeout 100 python3 probe_spec_steps.py --model $M --ks 0,8 --kind open --rounds 1
