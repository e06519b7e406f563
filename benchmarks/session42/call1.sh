#!/usr/bin/env bash
# Session 42 call 1, as prepared in session 41 (fresh machine; carry .whl,
# .carry/testdata, .carry/COMMIT): the cached turn at 16- and 64-token blocks with the one-launch
# slot copy, loaded at engine start (session 41 measured the turn 0.4-1.0 ms slower at 64 with
# torch's 32-launch copy and with the Triton copy's first launch inside the timed turns); then
# the GPU tests of the copy path. If 64 is no slower on the turn, config.DEFAULT_BLOCK_SIZE -> 64.
set -uo pipefail
R=$PWD
source scripts/device_setup.sh
t() { local s; s=$(date +%s); "$@"; echo "rc=$? [$(( $(date +%s) - s )) s]"; }
t timeout 100 python3 -c "
from localllm.bench.models import resolve_model
print(resolve_model('llama3-8b-q4_k_m'))" > "$OUT/models.log" 2>&1
t timeout 60 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_copy_slots.py \
  > "$OUT/gpu_copy.log" 2>&1; tail -n 2 "$OUT/gpu_copy.log"
python3 -m localllm.cli bench --model llama3-8b-q4_k_m --scenario prefix -p 0 -r 2 > /dev/null 2>&1  # compiles
for round in 1 2 3; do
  for b in 16 64; do
    echo "== block $b round $round"
    t timeout 60 python3 -m localllm.cli bench --model llama3-8b-q4_k_m --scenario prefix -p 0 -r 5 \
      --block-size $b --json "$OUT/prefix_${b}_$round.json" > "$OUT/prefix_${b}_$round.log" 2>&1
    grep -E "│ 3900" "$OUT/prefix_${b}_$round.log"
  done
done
t timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_gpu_engine.py \
  -k "prefill_graph_for_short" > "$OUT/gpu_engine_prefix.log" 2>&1; tail -n 3 "$OUT/gpu_engine_prefix.log"
# session 42: the stream-K GEMM's GPU test, if time is left (call 3 may not come)
t timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -m gpu "$R"/tests/test_kernels_qlinear_mm.py \
  -k streamk > "$OUT/gpu_streamk.log" 2>&1; tail -n 2 "$OUT/gpu_streamk.log"
