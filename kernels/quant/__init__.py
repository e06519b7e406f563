"""The quant-format registry: one module per GGUF format (block layout, reference dequant,
repacking, plane dequant, kernel constants, tuning), collected here by qtype and by name,
plus the formats of other checkpoints (AWQ, `awq.py`) that have kernel facts only.
Adding a format: a module defining its `QuantFormat`, one line in `ALL`, tests."""

from __future__ import annotations

from gguf import GGMLQuantizationType

from localllm.kernels.quant import awq, floats, legacy, low_k, q4_0, q4_k, q5_k, q6_k, q8_0
from localllm.kernels.quant.base import KernelFacts, QuantFormat

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


__all__ = ["ALL", "BY_QTYPE", "KERNEL_FORMATS", "KernelFacts", "QuantFormat", "kernel_facts"]
