#!/usr/bin/env bash
# Session 43, call 1 (run in session 45, when the new fix-up was still on a branch; main has it
# since; ROUNDS=1 bash ...: one A/B round; carry .whl, .carry/testdata, .carry/COMMIT, .carry/old
# packed from f7d22e5): the GEMM GPU tests, then the stream-K GEMM's
# new fix-up (a partial tile per program, stored plainly and added by the tile's owner in K
# order) against session 42's (fp32 atomics into a zeroed workspace), each against the plain
# grid, at 100 and 128 rows on every llama shape. Weights from memory,
# CUDA-graph timing; every timing lands in $OUT/probe_{old,new}{1,2}.jsonl.
set -uo pipefail
R=$PWD
ROUNDS=${ROUNDS:-2}  # A/B rounds (1 when device time is short)
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_qlinear_mm.py \
  > "$OUT/gpu_mm.log" 2>&1; tail -n 2 "$OUT/gpu_mm.log"
python3 "$R"/scripts/wave_fill_configs.py /tmp/sk.jsonl --ts 100,128 --streamk > /dev/null
(cd "$R" && t timeout $((210 * ROUNDS)) bash scripts/ab_versions.sh $ROUNDS \
  'timeout 100 python3 '"$R"'/scripts/probe_qmm.py --configs /tmp/sk.jsonl --warm 8; mv "$OUT/probe_qmm_configs.jsonl" "$OUT/probe_$AB_TAG$AB_ROUND.jsonl"') \
  > "$OUT/ab_probe.log" 2>&1
grep -E "^=== |rc=|q4_k 28672|q4_0 12288" "$OUT/ab_probe.log"
python3 "$R"/scripts/ab_probe_table.py $(for r in $(seq "$ROUNDS"); do echo "$OUT/probe_old$r.jsonl" "$OUT/probe_new$r.jsonl"; done)
