#!/usr/bin/env bash
# Session 48, call 4 (carry .whl, .carry/anchors, .carry/llamacpp-bin.tar.xz, .carry/COMMIT): the
# ratio table of issue 16 on an H200 only (session 46's call B); on any other GPU it stops at once.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: stop"; exit 0; }
CALL_S=${CALL_S:-560} bash benchmarks/session46/callB.sh
