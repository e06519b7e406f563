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
    loops: tuple[tuple[int, int], ...] = ()  # per SASS loop: (instructions, shared-memory ones)

    @property
    def loop_shared(self) -> int:
        """Shared-memory instructions (LDS, STS, barriers, ..) inside the loops."""
        return sum(shared for _, shared in self.loops)


def compile_launch(launch: Launch, arch: int) -> Resources:
    """Build `launch` for sm_`arch` as Triton would at the first call, and measure it."""
    kernel, threads = build(launch, arch)
    cubin = kernel.asm["cubin"]
    regs, static_smem, local = _cubin_usage(cubin)
    return Resources(kernel.metadata.shared + static_smem, regs, local, threads,
                     tuple(sass_loops(sass(cubin))))  # fmt: skip


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


def _cuobjdump(cubin: bytes, flag: str) -> str:
    """The output of Triton's bundled `cuobjdump FLAG` on a cubin."""
    tool = os.path.join(os.path.dirname(triton.knobs.nvidia.ptxas.path), "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        return subprocess.run([tool, flag, fh.name], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip


def sass(cubin: bytes) -> str:
    """The SASS listing of a cubin."""
    return _cuobjdump(cubin, "-sass")


_INSTR = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
_BACK = re.compile(r"\bBRA\s+(?:`\()?(0x[0-9a-f]+)")
_SHARED = re.compile(r"\b(LDS|STS|LDSM|STSM|BAR|ATOMS)\b")


def sass_loops(listing: str) -> list[tuple[int, int]]:
    """(instructions, shared-memory instructions) of each loop of a SASS listing: the range
    from a backward branch's target to the branch."""
    ins = [(int(m.group(1), 16), m.group(2)) for m in map(_INSTR.match, listing.splitlines()) if m]
    loops = []
    for addr, text in ins:
        m = _BACK.search(text)
        if m and int(m.group(1), 16) < addr:
            body = [t for a, t in ins if int(m.group(1), 16) <= a <= addr]
            loops.append((len(body), sum(1 for t in body if _SHARED.search(t))))
    return loops


_USAGE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


def _cubin_usage(cubin: bytes) -> tuple[int, int, int]:
    """(registers per thread, static shared bytes, stack + local bytes) of a one-kernel cubin."""
    out = _cuobjdump(cubin, "--dump-resource-usage")
    m = _USAGE.search(out)
    if m is None:
        raise RuntimeError(f"cuobjdump printed no resource usage:\n{out}")
    reg, stack, shared, local = map(int, m.groups())
    return reg, shared, stack + local


# kernels whose K loop keeps every tile in registers: a shared-memory instruction inside one of
# their loops is a layout conversion Triton inserted (`quant/dp4a_ops_triton.py`, ROWS_FIRST)
REGISTER_LOOPS = frozenset({"_dp4a_kernel", "_dp4a_rope_kernel"})


def violations(res: Resources, props: DeviceProps, kernel: str = "") -> list[str]:
    """Why a program with these resources cannot launch on `props` (empty: it fits), or, for
    `kernel` (a function name) in REGISTER_LOOPS, runs its loops through shared memory."""
    out = []
    if kernel in REGISTER_LOOPS and res.loop_shared:
        out.append(f"{res.loop_shared} shared-memory instructions in the loops of {kernel}")
    if res.shared > props.smem_per_block:
        out.append(f"shared memory {res.shared} B > {props.smem_per_block} B per block")
    if res.registers > props.max_regs_per_thread:
        out.append(f"{res.registers} registers per thread > {props.max_regs_per_thread}")
    if res.registers * res.threads > props.regs_per_sm:
        out.append(f"{res.registers} registers x {res.threads} threads > {props.regs_per_sm}")
    return out
