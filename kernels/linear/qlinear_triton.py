"""The Triton quantized linear op: runs the kernel that `kernels/plan.linear_kernel` picks for
the rows and the format (the dp4a GEMV, the GEMV of `gemv_triton`, the fused GEMM of
`qmm_triton`, the tile GEMM, or dequantize + cuBLAS) and checks the inputs once."""

from __future__ import annotations

import torch
import triton

from localllm.kernels.device import device_props, interpreting
from localllm.kernels.fused.quant_act import QAct
from localllm.kernels.fused.quant_act_triton import fill_lazily
from localllm.kernels.linear.dequant_triton import dequantize
from localllm.kernels.linear.dp4a_triton import dp4a_config, dp4a_launch
from localllm.kernels.linear.gemv_core_triton import MODE_DOT, MODE_VEC, plane_args
from localllm.kernels.linear.gemv_triton import (
    QLinearConfig,
    _num_sms,
    _qlinear_kernel,
    group_size,
    kernel_constexprs,
    pick_config,
)
from localllm.kernels.linear.qlinear import QuantWeight
from localllm.kernels.linear.qmm_triton import mm_config, qmm_launch
from localllm.kernels.pdl import pdl_args
from localllm.kernels.plan import LinearKernel, linear_kernel
from localllm.kernels.quant import kernel_facts

__all__ = ["MODE_DOT", "MODE_VEC", "QLinearConfig", "group_size", "pick_config"]


def _check(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None) -> None:
    if x.dim() != 2 or x.shape[1] != w.k:
        raise ValueError(f"qlinear: x must be [T, {w.k}], got {tuple(x.shape)}")
    if x.stride(1) != 1:
        raise ValueError("qlinear: x must be contiguous along K")
    min_k = kernel_facts(w.fmt).min_k
    if w.k % min_k:
        raise ValueError(f"qlinear: K={w.k} is not a multiple of {min_k}")
    if bias is not None and (bias.shape != (w.n,) or not bias.is_contiguous()):
        raise ValueError(f"qlinear: bias must be a contiguous [{w.n}] vector")
    for name, t in w.tensors.items():
        if not t.is_contiguous() or t.device != x.device:
            raise ValueError(f"qlinear: plane {name!r} must be contiguous on {x.device}")


def _h2_mode(x: torch.Tensor, fmt: str, cfg: QLinearConfig) -> int:
    """H2 constexpr: 0 fp32 decode, 1 packed-fp16 math in plain Triton (the interpreter runs
    no inline asm), 2 packed-fp16 PTX. Needs fp16 x whose element pairs are 4-byte aligned."""
    ok = cfg.half2 and cfg.mode == MODE_VEC and kernel_facts(fmt).h2_center is not None
    if not ok or x.dtype != torch.float16 or x.data_ptr() % 4 or x.stride(0) % 2:
        return 0
    return 1 if interpreting() else 2


def _launch(
    x: torch.Tensor, out: torch.Tensor, bias: torch.Tensor | None, w: QuantWeight,
    cfg: QLinearConfig, t: int,
) -> None:  # fmt: skip
    """One kernel launch; x [t, K], out [t, N]."""
    f = kernel_facts(w.fmt)
    planes = plane_args(w.planes)
    groups, ng = w.k // f.group, cfg.tile // f.group
    per_split = triton.cdiv(triton.cdiv(groups, ng), cfg.split) * ng
    grid = (triton.cdiv(w.n, cfg.bn), triton.cdiv(t, cfg.bm), cfg.split)
    consts = kernel_constexprs(w.fmt, cfg, _h2_mode(x, w.fmt, cfg), bias is not None)
    _qlinear_kernel[grid](
        x, out, bias if bias is not None else out, *planes,
        t, w.n, groups, x.stride(0), out.stride(0), per_split,
        **consts, num_warps=cfg.warps, num_stages=cfg.stages, **pdl_args(x.device),
    )  # fmt: skip


def qlinear_launch(
    x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None, cfg: QLinearConfig
) -> torch.Tensor:
    """Run one explicit config (benchmarks and tests); `qlinear_triton` picks it for you."""
    _check(x, w, bias)
    t = x.shape[0]
    dtype = x.dtype if cfg.split == 1 else torch.float32
    alloc = torch.empty if cfg.split == 1 else torch.zeros
    out = alloc((t, w.n), device=x.device, dtype=dtype)  # [T, N]
    _launch(x, out, bias, w, cfg, t)
    return out if cfg.split == 1 else out.to(x.dtype)


def qlinear_triton(
    x: torch.Tensor | QAct,  # [T, K] fp16 / bf16 / fp32; a QAct opts in to int8 activations
    w: QuantWeight,
    bias: torch.Tensor | None = None,  # [N]
    out_dtype: torch.dtype | None = None,  # default x.dtype (the dp4a GEMV writes it directly)
) -> torch.Tensor:  # [T, N] in out_dtype
    act = x if isinstance(x, QAct) else None
    xt = x.x if isinstance(x, QAct) else x
    fp32_cuda = xt.dtype == torch.float32 and xt.device.type == "cuda"
    kernel = linear_kernel(xt.shape[0], w.fmt, act is not None, fp32_cuda)
    if kernel is LinearKernel.DP4A_GEMV and act is not None:
        out = _dp4a(act, w, bias, out_dtype or xt.dtype)
        return out
    out = _RUN[kernel](xt, w, bias)
    return out if out_dtype is None else out.to(out_dtype)


def _dp4a(act: QAct, w: QuantWeight, bias: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """A few rows: int8 activations x packed weights in dp4a (`dp4a_triton`); the int8 form comes
    from the producer of x (fused norm / SiLU) or is quantized here once."""
    x = act.x
    _check(x, w, bias)
    f = kernel_facts(w.fmt)
    xq, xs = fill_lazily(act, f.act_layout)
    cfg = dp4a_config(w.fmt, w.n, w.k, _num_sms(x.device), x.shape[0])
    return dp4a_launch(xq, xs, w.planes, w.fmt, w.n, bias, cfg, dtype)


def _dense(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None) -> torch.Tensor:
    """Formats without a kernel: cuBLAS on the dequantized matrix."""
    wd = w.tensors["w"]
    b = bias.to(wd.dtype) if bias is not None else None
    return torch.nn.functional.linear(x.to(wd.dtype), wd, b).to(x.dtype)


def _empty(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None) -> torch.Tensor:
    return x.new_empty((0, w.n))


def _qmm(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None) -> torch.Tensor:
    """Batched decode, verify, short chunks: the fused dequant-GEMM (fp16/bf16 on the GPU: its
    fp32 tiles would not fit in shared memory)."""
    _check(x, w, bias)
    props = device_props(x.device)
    cfg = mm_config(w.fmt, w.n, w.k, x.shape[0], props.sm_count, props.smem_per_block, props.arch)
    return qmm_launch(x, w.planes, w.fmt, w.n, bias, cfg)


def _picked(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None) -> torch.Tensor:
    """The GEMV or the tile GEMM, with `pick_config`'s launch."""
    return qlinear_launch(x, w, bias, pick_config(w.fmt, w.n, w.k, x.shape[0], x.device))


def _dequant_matmul(x: torch.Tensor, w: QuantWeight, bias: torch.Tensor | None) -> torch.Tensor:
    """Prefill: dequantize to x's dtype (`dequant_triton`), then cuBLAS."""
    _check(x, w, bias)
    wd = dequantize(w, x.dtype)  # [N, K] workspace, back to the caching allocator
    b = bias.to(x.dtype) if bias is not None else None
    return torch.nn.functional.linear(x, wd, b)


# the kernels of `plan.linear_kernel` (the dp4a GEMV takes the int8 form: `_dp4a`)
_RUN = {
    LinearKernel.DENSE: _dense,
    LinearKernel.EMPTY: _empty,
    LinearKernel.FUSED_GEMM: _qmm,
    LinearKernel.GEMV: _picked,
    LinearKernel.TILE_GEMM: _picked,
    LinearKernel.DEQUANT_MATMUL: _dequant_matmul,
}
