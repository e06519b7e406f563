"""Compile the project's Triton kernels to PTX on a CPU-only machine and compare snapshots.

Checks that a refactor leaves the compiled GPU code byte-identical (or shows where it does not)
without a GPU: every case is compiled with `triton.compile(ASTSource(...))` for sm_90, and the
PTX is written with its debug sections, `.loc`/`.file` lines, comments and labels stripped.

  python3 scripts/ptx_snapshot.py snap OUT_DIR [--only SUBSTR]   # one <case>.ptx per case
  python3 scripts/ptx_snapshot.py diff OLD_DIR NEW_DIR           # exit 1 on any difference
  python3 scripts/ptx_snapshot.py list                           # the case names

Typical use: `snap /tmp/before` on the base commit (e.g. in `git worktree add /tmp/base
<commit>`; this file may be copied into an older checkout that has the launchers'
`kernel_constexprs` helpers), `snap /tmp/after` on your change, then `diff`. About a minute
for all cases on two cores. Branch labels (`$L__BB0_2`) are kept as they are; the labels of
the debug sections (`$L__tmp12:`, which move with the source and its inlined calls) are
dropped. The quantized-linear cases are built from the format
registry (`kernels/quant`: every format with kernels), the dispatch table of `kernels/plan.py`
(one case per `LinearKernel` that a row count reaches) and the launchers' own config and
constexpr functions, so new formats and launch changes are covered without editing this file.
"""

# ruff: noqa: E402  (the environment is set before Triton is imported)
from __future__ import annotations

import argparse
import difflib
import hashlib
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile, never interpret
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from localllm.formats import awq as awq_file
from localllm.kernels import plan
from localllm.kernels.attention import paged_triton_kernels as attn
from localllm.kernels.device import profile
from localllm.kernels.fused import (
    activation_triton,
    argmax_triton,
    norm_triton,
    rope_kv_triton,
)
from localllm.kernels.fused.quant_act import QUANT_CODES
from localllm.kernels.linear import dequant_triton, dp4a_triton, gemv_triton, qmm_triton
from localllm.kernels.quant import ALL, KERNEL_FORMATS, KernelFacts, awq, kernel_facts

TARGET = GPUTarget("cuda", 90, 32)
N, K = 4096, 4096  # the weight shape of the linear cases (a 7-8B attention projection)
GPU = profile("h200")  # the launch rules pick their configs for this device (`kernels/device.py`)


@dataclass
class Case:
    name: str
    kernel: triton.runtime.jit.JITFunction
    types: dict[str, str]  # non-constexpr arguments that are not "i32", by name
    consts: dict[str, object]
    warps: int
    stages: int

    def signature(self) -> dict[str, str]:
        return {a: "constexpr" if a in self.consts else self.types.get(a, "i32")
                for a in self.kernel.arg_names}  # fmt: skip


def _plane_types(fmt: str, prefix: str = "p") -> dict[str, str]:
    """Pointer types of the five plane arguments (unused slots repeat the first plane)."""
    f = kernel_facts(fmt)
    planes = _sample_planes(f)
    names = list(f.planes) + [f.planes[0]] * (5 - len(f.planes))
    return {f"{prefix}{i}": "*" + _ty(planes[p].dtype) for i, p in enumerate(names)}


def _sample_planes(f: KernelFacts) -> dict[str, torch.Tensor]:
    """The planes of a small zero weight of the format (for their dtypes)."""
    if f.pack is not None:  # GGUF: repack zero blocks
        q = next(q for q in ALL if q.kernel is f)
        return f.pack(torch.zeros(1, f.min_k // q.block_size, q.type_size, dtype=torch.uint8))
    qweight, qzeros, scales = awq_file.quantize(torch.zeros(8, f.min_k), f.min_k)  # AWQ
    return awq.pack(qweight.contiguous(), qzeros.contiguous(), scales.contiguous())


def _ty(dtype: torch.dtype) -> str:
    return {torch.float16: "fp16", torch.float32: "fp32", torch.int32: "i32", torch.int16: "i16",
            torch.int8: "i8", torch.uint8: "u8", torch.bfloat16: "bf16"}[dtype]  # fmt: skip


# one row count (and x dtype) per kernel of `plan.linear_kernel`
_ROWS = {
    plan.LinearKernel.DP4A_GEMV: (1, True, torch.float16),
    plan.LinearKernel.GEMV: (1, False, torch.float16),
    plan.LinearKernel.FUSED_GEMM: (8, False, torch.float16),
    plan.LinearKernel.TILE_GEMM: (8, False, torch.float32),  # fp32 x on the GPU
    plan.LinearKernel.DEQUANT_MATMUL: (256, False, torch.float16),
}


def _linear_cases(fmt: str) -> Iterator[Case]:
    for kernel, (rows, int8, dtype) in _ROWS.items():
        fp32_gpu = dtype == torch.float32
        assert plan.linear_kernel(rows, fmt, int8, fp32_gpu) is kernel, (fmt, kernel)
        name = f"{fmt}_{kernel.name.lower()}"
        if kernel is plan.LinearKernel.DP4A_GEMV:
            yield _dp4a_case(name, fmt)
            if plan.int8_rows(kernel_facts(fmt).act_layout) >= 5:  # a 4-draft verify step
                yield _dp4a_case(f"{name}_5rows", fmt, 5)
        elif kernel is plan.LinearKernel.FUSED_GEMM:
            yield _qmm_case(name, fmt, rows, dtype)
        elif kernel is plan.LinearKernel.DEQUANT_MATMUL:
            yield _dequant_case(name, fmt)
        else:
            yield from _gemv_cases(name, fmt, rows, dtype)


def _gemv_cases(name: str, fmt: str, rows: int, dtype: torch.dtype) -> Iterator[Case]:
    cfg = gemv_triton.pick_config(fmt, N, K, rows, GPU)
    x = "*" + _ty(dtype)
    types = {"x_ptr": x, "out_ptr": x, "bias_ptr": x, **_plane_types(fmt)}
    h2s = [0, 2] if cfg.half2 and dtype == torch.float16 else [0]
    for h2 in h2s:
        consts = gemv_triton.kernel_constexprs(fmt, cfg, h2, True)
        yield Case(f"{name}_h2" if h2 else name, gemv_triton._qlinear_kernel, types, consts,
                   cfg.warps, cfg.stages)  # fmt: skip


def _dp4a_case(name: str, fmt: str, rows: int = 1) -> Case:
    cfg = dp4a_triton.dp4a_config(fmt, N, K, GPU.sm_count, rows)
    ng, _, split = dp4a_triton.split_groups(cfg, K // kernel_facts(fmt).group)
    types = {"xq_ptr": "*i8", "xs_ptr": "*fp32", "out_ptr": "*fp16", "bias_ptr": "*fp16",
             **_plane_types(fmt)}  # fmt: skip
    rb = dp4a_triton.row_block(rows)
    groups = K // kernel_facts(fmt).group
    consts = dp4a_triton.kernel_constexprs(fmt, cfg.bn, ng, groups, rb, split > 1, False, False)
    return Case(
        name, dp4a_triton._dp4a_kernel, types, consts, dp4a_triton.fitting_warps(cfg.warps, ng), 1
    )


def _qmm_case(name: str, fmt: str, rows: int, dtype: torch.dtype) -> Case:
    cfg = qmm_triton.mm_config(fmt, N, K, rows, GPU.sm_count, GPU.smem_per_block, GPU.arch)
    ng, _, split = qmm_triton.split_groups(fmt, cfg.ng, cfg.split, K // 32)
    x = "*" + _ty(dtype)
    types = {"x_ptr": x, "out_ptr": "*fp32" if split > 1 else x, "bias_ptr": x,
             **_plane_types(fmt), "res_ptr": x, "cnt_ptr": "*i32"}  # fmt: skip
    consts = qmm_triton.kernel_constexprs(fmt, cfg, ng, split > 1, False, dtype)
    return Case(name, qmm_triton._qmm_kernel, types, consts, cfg.warps, cfg.stages)


def _dequant_case(name: str, fmt: str) -> Case:
    cfg = dequant_triton.dequant_config(fmt, N, K, GPU.sm_count)
    ng, _, _ = qmm_triton.split_groups(fmt, cfg.ng, cfg.split, K // 32)
    types = {"out_ptr": "*fp16", **_plane_types(fmt)}
    consts = dequant_triton.kernel_constexprs(fmt, cfg, ng, torch.float16)
    return Case(name, dequant_triton._dequant_kernel, types, consts, cfg.warps, cfg.stages)


def _qkv_rope_case(fa: str, fb: str) -> Case:
    """The fused QKV + RoPE + KV store of a Q4_K_M layer: q+k in fa, v in fb."""
    types = {"xq_ptr": "*i8", "xs_ptr": "*fp32", "out_ptr": "*fp16", "bias_ptr": "*fp16",
             **_plane_types(fa, "pa"), **_plane_types(fb, "pb"), "POS": "*i64", "CS": "*fp32",
             "SLOT": "*i64", "KC": "*fp16", "VC": "*fp16"}  # fmt: skip
    cfg = dp4a_triton.rope_config(fa)
    consts = dp4a_triton.rope_constexprs(fa, fb, K, 128, 16, True, False, cfg)
    warps = dp4a_triton.fitting_warps(cfg.warps, dp4a_triton.rope_ng(fa, fb, K, cfg))
    return Case(f"dp4a_rope_{fa}_{fb}", dp4a_triton._dp4a_rope_kernel, types, consts, warps, 1)


def _other_cases() -> Iterator[Case]:
    """The kernels without a quant format (fixed launch shapes of a 7-8B model)."""
    f16 = "*fp16"
    yield Case("rms_norm", norm_triton._rms_norm_kernel,
               {"X": f16, "R": f16, "W": f16, "OUT": f16, "R_OUT": f16, "XQ": "*i8", "XS": "*fp32",
                "eps": "fp32"},
               dict(BLOCK_D=4096, BLOCK_C=plan.NORM_SPLIT_COLS, HAS_RESIDUAL=True,
                    QUANT=QUANT_CODES["w4"]), 8, 2)  # fmt: skip
    yield Case("silu", activation_triton._silu_mul_kernel,
               {"G": f16, "U": f16, "OUT": f16, "XQ": "*i8", "XS": "*fp32"},
               dict(BLOCK=512, QUANT=QUANT_CODES["w8"]), 4, 2)  # fmt: skip
    yield Case("rope_kv", rope_kv_triton._rope_store_kernel, _positional(
        rope_kv_triton._rope_store_kernel,
        [f16] * 3 + ["*i64", "*fp32", "*i8", "*i8", "*fp32", "*fp32", "*i64"]),
        dict(BLOCK_SIZE=16, HALF=64, HALF_PAD=64, HQ_PAD=4, HKV_PAD=1, INTERLEAVED=False,
             QMAX=127.0), 2, 2)  # fmt: skip
    # batch-1 decode of llama3-8b's GQA shape (4 query heads a KV head), split KV merged in the
    # kernel; over 16-token pages (a page number per KV position), and over 64-token pages that
    # hold whole KV tiles (`_tile_pages`: one page number a tile), int8 and fp16 KV
    attn_consts = dict(G=4, BLOCK_M=16, BLOCK_N=64, HEAD_DIM=128, D_PAD=128, SPLIT=True,
                       IEEE=False, MERGE=True, OUT_QUANT=QUANT_CODES["w4"], PDL=False,
                       PART_TILES=8, MERGE_ROWS=4, MERGE_PARTS=8, PREFETCH=False, WIDEN=0,
                       KDOT=0, EMU=False)  # fmt: skip
    for name, kv, quant, bs in (("attn", "*i8", True, 16), ("attn_page64_i8", "*i8", True, 64),
                                ("attn_page64_fp16", f16, False, 64)):  # fmt: skip
        yield Case(name, attn._attn_kernel, _positional(
            attn._attn_kernel, [f16, kv, kv, "*fp32", "*fp32", "*i32", "*i32", "*i32", f16,
                                "*fp32", "*fp32"] + ["i32"] * 20 + ["fp32", "*i32", "*i8", "*fp32"]),
            dict(attn_consts, BLOCK_SIZE=bs, QUANT=quant), 4, 2)  # fmt: skip
    yield Case("argmax", argmax_triton._block_argmax_kernel,
               _positional(argmax_triton._block_argmax_kernel, ["*fp32", "*fp32", "*i32"]),
               dict(BLOCK=4096), 8, 2)  # fmt: skip


def _positional(kernel: triton.runtime.jit.JITFunction, types: list[str]) -> dict[str, str]:
    """Types of the first len(types) arguments (the rest are i32 or constexpr)."""
    return dict(zip(kernel.arg_names, types))


def cases() -> Iterator[Case]:
    for fmt in KERNEL_FORMATS:
        yield from _linear_cases(fmt)
    yield _qkv_rope_case("q4_k", "q6_k")
    yield from _other_cases()


def compile_ptx(case: Case) -> str:
    """Normalized PTX of one case (no debug sections, locations, comments or debug labels)."""
    src = ASTSource(fn=case.kernel, signature=case.signature(), constexprs=dict(case.consts))
    opts = {"num_warps": case.warps, "num_stages": case.stages}
    ptx = triton.compile(src, target=TARGET, options=opts).asm["ptx"]
    ptx = ptx.split(".section\t.debug")[0]
    keep = [line for line in ptx.splitlines()
            if not line.strip().startswith((".loc", ".file", "//")) and not _DEBUG_LABEL.match(line)]  # fmt: skip
    return "\n".join(keep)


# labels that only mark source ranges and inlined calls for the (cut) debug sections
_DEBUG_LABEL = re.compile(r"\$L__(tmp|func_begin|func_end)\d+:")


def snap(out: Path, only: str | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for case in cases():
        if only and only not in case.name:
            continue
        try:
            ptx = compile_ptx(case)
        except Exception as e:  # recorded, so that a diff shows it
            ptx = f"ERROR {type(e).__name__}: {str(e)[:300]}"
        (out / f"{case.name}.ptx").write_text(ptx)
        print(case.name, hashlib.md5(ptx.encode()).hexdigest()[:10], len(ptx), flush=True)


def diff(old: Path, new: Path) -> int:
    names = sorted({p.name for p in old.glob("*.ptx")} | {p.name for p in new.glob("*.ptx")})
    bad = 0
    for name in names:
        a, b = old / name, new / name
        if not a.exists() or not b.exists():
            print(f"{name}: only in {old if a.exists() else new}")
            bad += 1
        elif a.read_text() != b.read_text():
            lines = difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(),
                                         str(a), str(b), lineterm="", n=1)  # fmt: skip
            print("\n".join(list(lines)[:40]))
            bad += 1
    print(f"{len(names) - bad} of {len(names)} cases identical")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snap", help="compile every case to OUT/<case>.ptx")
    s.add_argument("out", type=Path)
    s.add_argument("--only", help="only cases whose name contains this")
    d = sub.add_parser("diff", help="compare two snapshot folders")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    sub.add_parser("list", help="print the case names")
    args = ap.parse_args()
    if args.cmd == "snap":
        snap(args.out, args.only)
    elif args.cmd == "diff":
        return diff(args.old, args.new)
    else:
        print("\n".join(c.name for c in cases()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
