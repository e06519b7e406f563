#!/usr/bin/env bash
# Install every direct dependency at the lowest version pyproject.toml allows and run the tests on
# them, so a floor that is too low shows up here and not on a user's machine (session 47 found
# llguidance, textual, gguf, torch / triton, openai and ollama too low: BENCHMARKS.md). Needs
# network (PyPI) and ~25 min on 2 CPU cores for the whole suite; pytest arguments narrow it, e.g.
# `bash scripts/check_floors.sh tests/test_tui_app.py`. FLOORS_VENV: the venv (made if missing).
#   bash scripts/check_floors.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${FLOORS_VENV:-/tmp/localllm-floors}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch first, the CPU build (its floor would pull a CUDA build of several GB), then uv
"$venv/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0 uv
# uv prints each version it installs (" + gguf==0.17.0"): the floors the tests then run on
"$venv/bin/uv" pip install --python "$venv/bin/python" --resolution lowest-direct -e ".[dev]"
"$venv/bin/python" -m pytest -q -p no:cacheprovider -rfE "$@"
