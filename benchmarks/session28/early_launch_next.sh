#!/usr/bin/env bash
# The measurement session 28 could not run (no device time left): early_launch.patch's verify
# steps launched before their events are made, on pycode-22m, in one device call (~6 min).
# Here (repo root, on a commit the patch applies to):
#   bash scripts/ab_versions.sh --pack HEAD && git apply benchmarks/session28/early_launch.patch
#   bash scripts/stamp_commit.sh
# There (carrying .whl and .carry, with .carry/testdata holding pycode-22m):
#   bash benchmarks/session28/early_launch_next.sh
# Land the patch if the k = 4 verify step is faster with the early launch ("k4 early" against
# "k4 serial", both rounds) and the A/B's grounded speedup does not drop.
set -uo pipefail
R=$PWD
(source scripts/device_setup.sh && python3 "$R"/benchmarks/session28/early_launch_probe.py)
AB_WARMUP=1 bash scripts/ab_versions.sh 2 "python3 $R/scripts/spec_measure.py --skip-cost --smollm2 none --ks 4 --streams 8 --stream-gen 32 --out \$OUT/\$AB_TAG 2>&1 | grep -E 'batch 1|streams'"
source scripts/device_setup.sh
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider "$R"/tests/test_gpu_engine.py "$R"/tests/test_gpu_spec.py -k "overlap or spec" 2>&1 | tail -2
