#!/usr/bin/env bash
# Run here before a GPU-machine call: writes the checkout's commit ("<sha>" or "<sha>+dirty")
# to .carry/COMMIT, which scripts/device_setup.sh exports as LOCALLLM_GIT_COMMIT for bench
# provenance (the machine's copy of the working tree carries stale git metadata).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry
sha=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then sha="$sha+dirty"; fi
echo "$sha" > .carry/COMMIT
echo "$sha"
