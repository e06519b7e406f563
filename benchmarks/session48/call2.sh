#!/usr/bin/env bash
# Session 48, call 2 (carry .whl with llguidance 1.7.0, .carry/td (stories260K only),
# .carry/anchors, .carry/llamacpp-bin.tar.xz, .carry/COMMIT): the guided decoding GPU tests owed
# since session 47 (they failed there on llguidance 1.6.1), then, with the time left, the ratio
# table of issue 16 if the GPU is an H200 (session 46's call B: llama.cpp built off the GPU
# machine, both engines on both files in this call) and the turn after a cached prefix.
set -uo pipefail
start=$(date +%s)
R=$PWD
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
( source scripts/device_setup.sh
  export LOCALLLM_TESTDATA="$R/.carry/td"
  python3 -c "import importlib.metadata as m; print('llguidance', m.version('llguidance'))"
  t timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_guided.py \
    > "$OUT/gpu_guided.log" 2>&1; tail -n 3 "$OUT/gpu_guided.log" )
cd "$R"
# the issue's targets are an H200's; session 46 has this code's table on an H100
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: no table"; exit 0; }
used=$(( $(date +%s) - start ))
CALL_S=$(( ${CALL_S:-590} - used )) bash benchmarks/session46/callB.sh
