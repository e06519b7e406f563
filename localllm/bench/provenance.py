"""What a benchmark result was measured on and with: GPU, driver, library versions, the model
file's sha256 and the code's git commit (or the installed version outside a checkout)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path

import localllm
from localllm.bench.models import cache_dir

HASH_METHOD = "sha256 of the whole file, cached by path, size and mtime"
_CHUNK = 8 << 20


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file, remembered in the bench cache under (path, size, mtime) so a 5 GB
    model is read once, not on every run."""
    p = Path(path).resolve()
    st = p.stat()
    key = f"{p}|{st.st_size}|{st.st_mtime_ns}"
    store = cache_dir() / "sha256.json"
    try:
        known = json.loads(store.read_text())
    except (OSError, ValueError):
        known = {}
    if key not in known:
        known[key] = _sha256(p)
        try:
            store.parent.mkdir(parents=True, exist_ok=True)
            tmp = store.with_suffix(".tmp")
            tmp.write_text(json.dumps(known, indent=0))
            tmp.replace(store)
        except OSError:  # a read-only cache only costs the next run a re-read
            pass
    return known[key]


def model_digest(path: str) -> dict:
    """{"sha256", "bytes", "method"} of a model file, or of a model folder (the sha256 of the
    sorted "name sha256" lines of its files)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file())
        lines = "".join(f"{f.relative_to(p)} {file_sha256(f)}\n" for f in files)
        digest = hashlib.sha256(lines.encode()).hexdigest()
        size = sum(f.stat().st_size for f in files)
        return {"sha256": digest, "bytes": size, "method": HASH_METHOD + ", per file of the folder"}
    return {"sha256": file_sha256(p), "bytes": p.stat().st_size, "method": HASH_METHOD}


def code_version() -> dict:
    """The git commit of the checkout this package runs from (and whether it has uncommitted
    changes), else the installed package version. A copy of a checkout whose git metadata is
    not its source's (the GPU machine's working-tree copy) names it in LOCALLLM_GIT_COMMIT
    ("<sha>" or "<sha>+dirty"; `scripts/device_setup.sh` reads it from `.carry/COMMIT`)."""
    out: dict = {"version": localllm.__version__, "git_commit": None, "git_dirty": None}
    stamped = os.environ.get("LOCALLLM_GIT_COMMIT", "").strip()
    if stamped:
        sha, _, flag = stamped.partition("+")
        out.update(git_commit=sha, git_dirty=flag == "dirty")
        return out
    root = Path(localllm.__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if commit.returncode == 0:
            out["git_commit"] = commit.stdout.strip()
            status = subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
            )
            out["git_dirty"] = bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def _driver_version() -> str | None:
    """The NVIDIA driver version from nvidia-smi (torch does not expose it)."""
    try:
        r = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = r.stdout.strip().splitlines()
    return lines[0].strip() if r.returncode == 0 and lines else None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def system_info(device_type: str, device_index: int | None = None) -> dict:
    """GPU (or CPU) name, driver, compute capability, memory and library versions."""
    import torch

    info: dict = {
        "device": device_type,
        "name": _cpu_name(),
        "driver": None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": None,
        "python": platform.python_version(),
        "host": platform.node(),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        pass
    if device_type == "cuda":
        idx = device_index if device_index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        info.update(
            name=props.name,
            driver=_driver_version(),
            compute_capability=f"{props.major}.{props.minor}",
            memory_bytes=props.total_memory,
            sm_count=props.multi_processor_count,
        )
    return info
