#!/usr/bin/env bash
# Session 43, the one call when device time is short (run in session 45 on the branch that held
# the new fix-up, since merged; carry .whl, .carry/testdata, .carry/COMMIT):
# the GEMM GPU tests (every format's stream-K form), then
# plain grid against stream-K at 100 and 128 rows on every llama shape with this tree (the
# dispatch's choice; weights from memory, CUDA-graph timing), then the engine and speculation
# GPU tests (the stream-K dispatch at 65-128 rows runs inside them).
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_qlinear_mm.py \
  > "$OUT/gpu_mm.log" 2>&1; tail -n 2 "$OUT/gpu_mm.log"
python3 "$R"/scripts/wave_fill_configs.py /tmp/sk.jsonl --ts 100,128 --streamk > /dev/null
t timeout 110 python3 "$R"/scripts/probe_qmm.py --configs /tmp/sk.jsonl --warm 8 > "$OUT/probe.log" 2>&1
mv "$OUT/probe_qmm_configs.jsonl" "$OUT/probe_new.jsonl"
python3 "$R"/scripts/ab_probe_table.py "$OUT/probe_new.jsonl"
t timeout 330 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  "$R"/tests/test_gpu_spec.py > "$OUT/gpu_engine.log" 2>&1; tail -n 3 "$OUT/gpu_engine.log"
