#!/usr/bin/env bash
# A/B two versions of the package in one GPU-machine call: runs COMMAND under the old package
# (a copy of REV's package folders carried in .carry/old) and under the working tree's, in turn,
# ROUNDS times (old, new, old, new, ...), with $AB_TAG set to "old" / "new" and $AB_ROUND to the
# round. Figures of one call are comparable; figures of different calls are not.
#
# Here (before the call):   bash scripts/ab_versions.sh --pack REV
#                           bash scripts/stamp_commit.sh
# There (the call, carrying .carry/old):
#   bash scripts/ab_versions.sh 2 python3 scripts/ab_attention.py --tag '$AB_TAG'
#   bash scripts/ab_versions.sh 1 python3 -m localllm.cli bench --model llama3-8b-q4_k_m -p 0 -n 128
# COMMAND runs from the scratch folder of scripts/device_setup.sh; quote '$AB_TAG' to have it
# expanded per run. Output: COMMAND's, each run headed by "=== TAG round R".
# AB_WARMUP=1: run COMMAND once first under the new package, its output dropped ($AB_TAG
# "warmup"): on a fresh machine the first run may pay Triton's compiles and the synthetic
# models' writing (in session 28 an old round run first read less than half the new round's
# plain decode speed: BENCHMARKS).
# AB_OLD=DIR: the old package from DIR instead of .carry/old (e.g. `--pack REV .carry/old2`, for
# two A/Bs against different versions on one warm machine).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--pack" ]; then
  rev=${2:?usage: ab_versions.sh --pack REV [DIR]}
  dir=${3:-.carry/old}
  rm -rf "$dir" && mkdir -p "$dir"
  git archive "$rev" localllm kernels formats tui | tar -x -C "$dir"
  echo "$rev" > "$dir/REV"
  echo "packed $(git rev-parse --short "$rev") into $dir"
  exit 0
fi
rounds=${1:?usage: ab_versions.sh ROUNDS COMMAND...}
shift
OLD=${AB_OLD:-.carry/old}
[ -d "$OLD/localllm" ] || { echo "no $OLD: run 'bash scripts/ab_versions.sh --pack REV $OLD' here and carry it"; exit 2; }
source scripts/device_setup.sh
R=$LOCALLLM_REPO
# the old package: the same symlink tree as device_setup's /tmp/pkg, over .carry/old
rm -rf /tmp/pkg_old && mkdir -p /tmp/pkg_old/localllm
OLD=$(cd "$R" && cd "$OLD" && pwd)
for f in "$OLD"/localllm/*; do ln -sfn "$f" /tmp/pkg_old/localllm/; done
for d in kernels formats tui; do ln -sfn "$OLD/$d" /tmp/pkg_old/localllm/$d; done
NEW_PP=$PYTHONPATH
OLD_PP=${PYTHONPATH//\/tmp\/pkg/\/tmp\/pkg_old}
echo "old: $(cat "$OLD/REV" 2>/dev/null || echo '?'), new: ${LOCALLLM_GIT_COMMIT:-working tree}"
status=0
if [ "${AB_WARMUP:-0}" = 1 ]; then
  echo "=== warmup (output dropped)"
  AB_TAG=warmup AB_ROUND=0 PYTHONPATH=$NEW_PP bash -c "$*" > /dev/null 2>&1 || echo "warmup run failed"
fi
for round in $(seq 1 "$rounds"); do
  for tag in old new; do
    if [ "$tag" = old ]; then pp=$OLD_PP; else pp=$NEW_PP; fi
    echo "=== $tag round $round"
    AB_TAG=$tag AB_ROUND=$round PYTHONPATH=$pp bash -c "$*" || status=$?
  done
done
exit $status
