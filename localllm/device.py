"""Device and dtype selection, and memory figures for clear out-of-memory messages."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch

from localllm.errors import LocalLLMError


def cache_root() -> Path:
    """localllm's cache folder: $LOCALLLM_CACHE, else $XDG_CACHE_HOME/localllm (~/.cache)."""
    base = os.environ.get("LOCALLLM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "localllm"
    )
    return Path(base)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise LocalLLMError("--device cuda was asked for but no CUDA GPU is available")
    if dev.type not in ("cuda", "cpu"):
        raise LocalLLMError(f"unsupported device {name!r} (use cpu or cuda)")
    return dev


def pick_backend(name: str, device: torch.device) -> str:
    from localllm.kernels.registry import triton_available

    if name == "triton":
        if device.type != "cuda":
            raise LocalLLMError("the triton backend needs a CUDA device")
        if not triton_available():
            raise LocalLLMError(
                "the triton backend needs the `triton` package (pip install triton)"
            )
    if name != "auto":
        return name
    if device.type != "cuda":
        return "reference"
    if not triton_available():
        logging.getLogger("localllm").warning(
            "triton is not installed: running the slow torch reference kernels on the GPU "
            "(pip install triton)"
        )
        return "reference"
    return "triton"


_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def activation_dtype(device: torch.device, name: str = "auto") -> torch.dtype:
    if name != "auto":
        return _DTYPES[name]
    return torch.float16 if device.type == "cuda" else torch.float32


_STREAMS: dict[int, tuple[tuple[int, int, int], torch.cuda.Stream]] = {}


def current_stream(index: int) -> torch.cuda.Stream:
    """torch.cuda.current_stream(index) without its ~4 us of Python a call (measured on an H200
    host, scripts/probe_host_calls.py): the Stream object is kept while the raw stream
    handle stays the same. For recording events on a step's host path: Event.record() looks
    the stream up on every call."""
    raw = torch._C._cuda_getCurrentStream(index)  # (stream id, device index, device type)
    hit = _STREAMS.get(index)
    if hit is not None and hit[0] == raw:
        return hit[1]
    stream = torch.cuda.Stream(stream_id=raw[0], device_index=raw[1], device_type=raw[2])
    _STREAMS[index] = (raw, stream)
    return stream


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "CPU"


def physical_cores() -> int:
    """Physical CPU cores this process may run on (hyper-threads not counted)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cores: set[tuple[str, str]] = set()
    try:  # Linux: one (physical id, core id) pair per core
        phys = core = ""
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "physical id":
                phys = value.strip()
            elif key == "core id":
                core = value.strip()
                cores.add((phys, core))
    except OSError:
        pass
    n = len(cores) or os.cpu_count() or 1
    return max(1, min(n, usable or n))


def idle_cores() -> int:
    """Physical cores that the machine's current load leaves idle (at least 1). Every CPU
    kernel thread waits for the slowest at each op, so a thread that shares its core with
    another process stalls them all: on a busy 2-core machine (load average 6) one thread
    decoded 5-20x faster than two (docs/cli.md has the figures)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    free = (os.cpu_count() or 1) - round(load)  # the load average counts the whole machine
    return max(1, min(physical_cores(), free))


def set_cpu_threads(n: int | None) -> int:
    """Threads of torch's CPU kernels (intra-op, and inter-op while it can still change):
    n, else $OMP_NUM_THREADS, else the idle physical cores. Returns the number in use."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    n = n or (int(env) if env.isdigit() and int(env) > 0 else idle_cores())
    torch.set_num_threads(n)
    if torch.get_num_interop_threads() != n:
        try:
            torch.set_num_interop_threads(n)
        except RuntimeError:  # only settable before the first inter-op parallel work
            pass
    return n
