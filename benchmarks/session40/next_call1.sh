#!/usr/bin/env bash
# Prepared in session 40 for the next session's first call (fresh machine, carrying .whl,
# .carry/testdata, .carry/COMMIT and .carry/old packed from 19e3348:
# `bash scripts/ab_versions.sh --pack 19e3348 && bash scripts/stamp_commit.sh`):
# 1. the turn after a cached 3,900-token prefix, 19e3348 against this tree, two rounds after a
#    warm-up (session 40's host cuts and padding rows: ~0.4 ms expected, one round could not
#    resolve it);
# 2. the last GPU test session 40 could not run on its code;
# 3. if time is left, the fused GEMM at 100 rows against the untried wave-filling configs on the
#    four under-filled shapes (scripts/wave_fill_configs.py, a weak lead: BENCHMARKS session 40).
set -uo pipefail
R=$PWD
source scripts/device_setup.sh >/dev/null
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 100 python3 -c "
from localllm.bench.models import resolve_model
print(resolve_model('llama3-8b-q4_k_m'))" > "$OUT/models.log" 2>&1
cd "$R" && AB_WARMUP=1 t timeout 300 bash scripts/ab_versions.sh 2 python3 -m localllm.cli bench \
  --model llama3-8b-q4_k_m --scenario prefix -p 0 -r 5 > "$OUT/ab_prefix.log" 2>&1
grep -E "===|│" "$OUT/ab_prefix.log" | grep -vE "━|─"
t timeout 90 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_spec.py \
  -k bench_spec > "$OUT/gpu_tests.log" 2>&1; tail -n 3 "$OUT/gpu_tests.log"
python3 "$R"/scripts/wave_fill_configs.py /tmp/wf.jsonl --ts 100 \
  --shapes 6144x4096,28672x4096,12288x4096,22016x4096
t timeout 150 python3 "$R"/scripts/probe_qmm.py --configs /tmp/wf.jsonl --warm 8 > "$OUT/wave_fill.log" 2>&1
grep -E "heuristic" "$OUT/wave_fill.log"
