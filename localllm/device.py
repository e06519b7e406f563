"""Device and dtype selection, and memory figures for clear out-of-memory messages."""

from __future__ import annotations

import logging

import torch

from localllm.errors import LocalLLMError


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


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "CPU"
