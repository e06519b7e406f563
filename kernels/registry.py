"""The one dispatch point between the torch references and the Triton kernels.

`Ops("triton").rms_norm(...)` calls the Triton version, `Ops("reference")` the pure-torch one;
both backends are an `OpSet` (`ops.py`: one typed signature per op) built from explicit
imports below, so a missing or mistyped op is an error at import (and for mypy), never a
silent fallback. The Triton modules are imported only when `triton` imports, so the reference
backend works on a machine without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from localllm.kernels.ops import OpSet

BACKENDS = ("reference", "triton")


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return True


def reference_ops() -> OpSet:
    from localllm.kernels.attention import copy_slots, paged
    from localllm.kernels.fused import (
        activation,
        argmax,
        masked_argmax,
        norm,
        qkv_rope,
        quant_act,
        rope_kv,
    )
    from localllm.kernels.linear import qlinear

    return OpSet(
        rms_norm=norm.rms_norm,
        add_rms_norm=norm.add_rms_norm,
        silu_mul=activation.silu_mul,
        rope_store_kv=rope_kv.rope_store_kv,
        paged_attention=paged.paged_attention,
        qlinear=qlinear.qlinear_ref,
        qkv_rope_store=qkv_rope.qkv_rope_store,
        argmax=argmax.argmax_ref,
        masked_argmax=masked_argmax.masked_argmax_ref,
        quant_act=quant_act.quant_act_ref,
        copy_slots=copy_slots.copy_slots,
    )


def triton_ops() -> OpSet:
    if not triton_available():
        raise RuntimeError("the triton backend needs the `triton` package")
    from localllm.kernels.attention import copy_slots_triton, paged_triton
    from localllm.kernels.fused import (
        activation_triton,
        argmax_triton,
        masked_argmax_triton,
        norm_triton,
        qkv_rope_triton,
        quant_act_triton,
        rope_kv_triton,
    )
    from localllm.kernels.linear import qlinear_triton

    return OpSet(
        rms_norm=norm_triton.rms_norm,
        add_rms_norm=norm_triton.add_rms_norm,
        silu_mul=activation_triton.silu_mul,
        rope_store_kv=rope_kv_triton.rope_store_kv,
        paged_attention=paged_triton.paged_attention,
        qlinear=qlinear_triton.qlinear_triton,
        qkv_rope_store=qkv_rope_triton.qkv_rope_store,
        argmax=argmax_triton.argmax_triton,
        masked_argmax=masked_argmax_triton.masked_argmax_triton,
        quant_act=quant_act_triton.quant_act_triton,
        copy_slots=copy_slots_triton.copy_slots_triton,
    )


_BUILDERS: dict[str, Callable[[], OpSet]] = {"reference": reference_ops, "triton": triton_ops}


class Ops(OpSet):
    """One backend's ops by attribute: `Ops("triton").paged_attention(...)`."""

    backend: str

    def __init__(self, backend: str) -> None:
        build = _BUILDERS.get(backend)
        if build is None:
            raise ValueError(f"unknown backend {backend!r}")
        impl = build()
        for f in fields(OpSet):
            object.__setattr__(self, f.name, getattr(impl, f.name))
        object.__setattr__(self, "backend", backend)
