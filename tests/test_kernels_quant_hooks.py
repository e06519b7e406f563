"""Every format with kernels provides the Triton functions of `kernels/quant/base.py`, and the
kernel families take them as constexpr arguments (no format code in `kernels/linear/`)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from localllm.kernels.quant import KERNEL_FORMATS, TritonHooks, kernel_facts, triton_hooks

triton = pytest.importorskip("triton")

FORMATS = sorted(KERNEL_FORMATS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_hooks_are_jit_functions(fmt: str) -> None:
    hooks = triton_hooks(fmt)
    assert isinstance(hooks, TritonHooks)
    h2 = kernel_facts(fmt).h2_center is not None
    for f in dataclasses.fields(TritonHooks):
        fn = getattr(hooks, f.name)
        if f.name in ("h2_word", "quant") and not h2:
            continue  # only the packed-fp16 GEMV uses these
        assert isinstance(fn, triton.runtime.jit.KernelInterface), (
            fmt,
            f.name,
        )  # JIT or interpreted


@pytest.mark.parametrize("fmt", FORMATS)
def test_launch_constexprs_carry_the_format(fmt: str) -> None:
    """The launchers' constexprs name the format's functions (what the PTX snapshot compiles)."""
    from localllm.kernels.linear import dp4a_triton, gemv_triton, qmm_triton

    hooks = triton_hooks(fmt)
    cfg = gemv_triton.pick_config(fmt, 256, 512, 1, torch.device("cpu"))
    g = gemv_triton.kernel_constexprs(fmt, cfg, 0, False)
    assert (g["LOAD"], g["FIELD"], g["TWO"]) == (
        hooks.load_tile,
        hooks.field,
        kernel_facts(fmt).two_scales,
    )
    assert dp4a_triton.format_constexprs(fmt, "_B") == {
        "LOAD_B": hooks.dp4a_load,
        "GROUP_B": hooks.dp4a_group,
    }
    mm = qmm_triton.kernel_constexprs(fmt, qmm_triton.MMConfig(16, 64, 8), 8, False, False,
                                      torch.float16)  # fmt: skip
    assert (mm["PTRS"], mm["LOAD"], mm["ADVANCE"], mm["DEQ"]) == (
        hooks.mm_ptrs,
        hooks.mm_load,
        hooks.mm_advance,
        hooks.mm_deq,
    )


def test_unknown_format_has_no_hooks() -> None:
    with pytest.raises(ValueError, match="no Triton kernel"):
        triton_hooks("q3_k")
