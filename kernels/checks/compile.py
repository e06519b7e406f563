"""Compile a captured `Launch` for a named GPU (no GPU needed) and check its resources.

Triton builds the cubin for `GPUTarget("cuda", arch, 32)` on any machine; its bundled
`cuobjdump` reads the registers per thread and any local-memory (spill) bytes, and the
compiled metadata gives the dynamic shared memory the launch asks for."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.runtime import jit

from localllm.kernels.checks.capture import Launch
from localllm.kernels.device import DeviceProps


@dataclass(frozen=True)
class Resources:
    shared: int  # bytes of shared memory per program (dynamic + static)
    registers: int  # per thread
    spill: int  # bytes of local memory per thread (register spills, stack)
    threads: int  # per program


def compile_launch(launch: Launch, arch: int) -> Resources:
    """Build `launch` for sm_`arch` as Triton would at the first call, and measure it."""
    kernel, threads = build(launch, arch)
    regs, static_smem, local = _cubin_usage(kernel.asm["cubin"])
    return Resources(kernel.metadata.shared + static_smem, regs, local, threads)


def build(launch: Launch, arch: int) -> tuple[Any, int]:
    """(the compiled kernel: PTX, cubin and metadata; threads per program) of `launch` built
    for sm_`arch` as Triton would at the first call."""
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = jit.create_function_from_signature(launch.fn.signature, launch.fn.params, backend)
    bound, spec, opts = binder(*launch.args, **launch.kwargs)
    options, signature, constexprs, attrs = launch.fn._pack_args(
        backend, launch.kwargs, bound, spec, opts
    )
    src = ASTSource(launch.fn, signature, constexprs, attrs)
    kernel = triton.compile(src, target=target, options=options.__dict__)
    return kernel, 32 * options.num_warps * getattr(options, "num_ctas", 1)


_USAGE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


def _cubin_usage(cubin: bytes) -> tuple[int, int, int]:
    """(registers per thread, static shared bytes, stack + local bytes) of a one-kernel cubin."""
    tool = os.path.join(os.path.dirname(triton.knobs.nvidia.ptxas.path), "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        out = subprocess.run(
            [tool, "--dump-resource-usage", fh.name], capture_output=True, text=True, check=True
        ).stdout
    m = _USAGE.search(out)
    if m is None:
        raise RuntimeError(f"cuobjdump printed no resource usage:\n{out}")
    reg, stack, shared, local = map(int, m.groups())
    return reg, shared, stack + local


def violations(res: Resources, props: DeviceProps) -> list[str]:
    """Why a program with these resources cannot launch on `props` (empty: it fits)."""
    out = []
    if res.shared > props.smem_per_block:
        out.append(f"shared memory {res.shared} B > {props.smem_per_block} B per block")
    if res.registers > props.max_regs_per_thread:
        out.append(f"{res.registers} registers per thread > {props.max_regs_per_thread}")
    if res.registers * res.threads > props.regs_per_sm:
        out.append(f"{res.registers} registers x {res.threads} threads > {props.regs_per_sm}")
    return out
