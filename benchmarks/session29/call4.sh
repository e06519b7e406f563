#!/usr/bin/env bash
# Session 29 call 4: the host path of a verify step (issue 15), old = the packed commit, new = the
# working tree: the small torch calls' costs, the phases of a batch-1 step (k = 0 and 4) per
# version, pycode-22m's speedups per version, then the GPU layout / overlap / speculation tests.
set -uo pipefail
R=$PWD
M=$R/.carry/testdata/models/pycode-22m-q4_k_m.gguf
(source scripts/device_setup.sh && python3 "$R"/scripts/probe_host_calls.py)
AB_WARMUP=1 bash scripts/ab_versions.sh 2 "python3 $R/scripts/probe_verify_path.py --model $M --ks 0,4 --steps 300 --rounds 1 2>&1 | grep round"
bash scripts/ab_versions.sh 2 "python3 $R/scripts/spec_measure.py --skip-cost --smollm2 none --ks 4 --streams 8 --stream-gen 32 --out \$OUT/\$AB_TAG\$AB_ROUND 2>&1 | grep -E 'batch 1|streams'"
source scripts/device_setup.sh
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider "$R"/tests/test_gpu_engine.py "$R"/tests/test_gpu_spec.py -k "overlap or spec or golden or mixed or prefill_graph or pdl or current_stream" 2>&1 | tail -2
