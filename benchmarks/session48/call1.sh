#!/usr/bin/env bash
# Session 48, call 1 (carry .whl with llguidance 1.7.0, .carry/testdata, .carry/COMMIT): the guided
# decoding GPU tests owed since session 47 (they failed there on llguidance 1.6.1).
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
python3 -c "import llguidance, importlib.metadata as m; print('llguidance', m.version('llguidance'))"
t timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_guided.py \
  > "$OUT/gpu_guided.log" 2>&1; tail -n 3 "$OUT/gpu_guided.log"
