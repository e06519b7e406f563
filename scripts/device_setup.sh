# Source this at the start of a command on a GPU machine without network:
#   source scripts/device_setup.sh
# Installs the pure-Python wheels carried in .whl/ (gguf, fastapi, ...), makes `localllm`
# importable from a symlink tree (no build step), points tests at carried test data, and
# cd's to a scratch folder so the checkout's own `localllm/` folder cannot shadow the package.
export LOCALLLM_REPO="$PWD"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
rm -rf /tmp/pkg && mkdir -p /tmp/pkg/localllm
for f in localllm/*; do ln -sfn "$PWD/$f" /tmp/pkg/localllm/; done
for d in kernels formats tui; do ln -sfn "$PWD/$d" /tmp/pkg/localllm/$d; done
export PYTHONPATH=/tmp/pkg${PYTHONPATH:+:$PYTHONPATH}
[ -d .carry/testdata ] && export LOCALLLM_TESTDATA="$PWD/.carry/testdata"
# the device copy's .git is not the source's: bench provenance takes the commit stamped by
# scripts/stamp_commit.sh before the call
[ -f .carry/COMMIT ] && export LOCALLLM_GIT_COMMIT="$(head -1 .carry/COMMIT)"
export PYTHONUNBUFFERED=1 LOCALLLM_CACHE=/tmp/localllm-cache
mkdir -p /tmp/run && cd /tmp/run
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
