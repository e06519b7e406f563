#!/usr/bin/env bash
# Prepared in session 41 for a later call of the next session: the stream-K form of the fused
# GEMM (kernels/linear/qmm_streamk_triton.py, built and tested in session 41, never timed)
# against the dispatch's config at 64, 100 and 128 rows, every llama shape (weights from
# memory, CUDA-graph timing). Triton 3.6 compiles it for sm_90 without spills
# (BENCHMARKS session 41). If it wins at 65-128 rows, the dispatch can pick it there
# (mm_config), with the sm_86 / sm_89 compile check extended to it.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_qlinear_mm.py \
  -k streamk > "$OUT/gpu_streamk.log" 2>&1; tail -n 2 "$OUT/gpu_streamk.log"
python3 "$R"/scripts/wave_fill_configs.py /tmp/sk.jsonl --ts 64,100,128 --streamk > /dev/null
t timeout 400 python3 "$R"/scripts/probe_qmm.py --configs /tmp/sk.jsonl --warm 8 > "$OUT/streamk.log" 2>&1
grep -E "heuristic" "$OUT/streamk.log"
