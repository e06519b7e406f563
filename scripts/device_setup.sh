# Source this at the start of a command on a GPU machine without network:
#   source scripts/device_setup.sh
# Installs the pure-Python wheels carried in .whl/ (gguf, fastapi, ...) and localllm itself.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/tmp/localllm-install.log 2>&1; then
  echo "editable install failed (see /tmp/localllm-install.log); using a symlink tree" >&2
  mkdir -p /tmp/pkg/localllm
  for f in localllm/*; do ln -sfn "$PWD/$f" /tmp/pkg/localllm/; done
  for d in kernels formats tui; do ln -sfn "$PWD/$d" /tmp/pkg/localllm/$d; done
  export PYTHONPATH=/tmp/pkg${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
