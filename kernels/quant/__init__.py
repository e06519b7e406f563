"""The quant-format registry: one module per GGUF format (block layout, reference dequant,
repacking, plane dequant, kernel constants, tuning; its Triton decode functions in a
`<name>_triton.py` beside it), collected here by qtype and by name, plus the formats of other
checkpoints (AWQ, `awq.py`) that have kernel facts only.
Adding a format: its modules (what they provide: `base.py`), one line in `ALL` (or
`KERNEL_FORMATS` for a format without GGUF blocks), tests."""

from __future__ import annotations

import functools
import importlib

from gguf import GGMLQuantizationType

from localllm.kernels.quant import awq, floats, legacy, low_k, q4_0, q4_k, q5_k, q6_k, q8_0
from localllm.kernels.quant.base import KernelFacts, QuantFormat, TritonHooks

ALL: tuple[QuantFormat, ...] = (
    floats.F32, floats.F16, floats.BF16, q4_0.FORMAT, legacy.Q4_1, legacy.Q5_0, legacy.Q5_1,
    q8_0.FORMAT, low_k.Q2_K, low_k.Q3_K, q4_k.FORMAT, q5_k.FORMAT, q6_k.FORMAT,
)  # fmt: skip
BY_QTYPE: dict[GGMLQuantizationType, QuantFormat] = {f.qtype: f for f in ALL}
# formats the packed-plane kernels run, by plane name ("q4_k", "awq128"); anything else is dense
KERNEL_FORMATS: dict[str, KernelFacts] = {
    **{f.name: f.kernel for f in ALL if f.kernel is not None},
    **awq.KERNELS,
}


def kernel_facts(fmt: str) -> KernelFacts:
    """The kernel facts of a packed format by name; ValueError for one without kernels."""
    f = KERNEL_FORMATS.get(fmt)
    if f is None:
        raise ValueError(f"qlinear: no Triton kernel for format {fmt!r}")
    return f


@functools.cache
def triton_hooks(fmt: str) -> TritonHooks:
    """The @triton.jit decode functions of a packed format (imports Triton on first use)."""
    module, _, name = kernel_facts(fmt).triton.partition(":")
    hooks = getattr(importlib.import_module(module), name or "HOOKS")
    if not isinstance(hooks, TritonHooks):
        raise TypeError(f"{kernel_facts(fmt).triton} must be a TritonHooks")
    return hooks


__all__ = [
    "ALL", "BY_QTYPE", "KERNEL_FORMATS", "KernelFacts", "QuantFormat", "TritonHooks",
    "kernel_facts", "triton_hooks",
]  # fmt: skip
