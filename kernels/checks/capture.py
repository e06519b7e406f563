"""Record Triton launches instead of running them: the launchers run as usual (on meta
tensors, so nothing is allocated or computed) and every `kernel[grid](...)` they reach is
kept as a `Launch`, with the specialization Triton itself would derive from its arguments."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.runtime import jit


@dataclass(frozen=True)
class Launch:
    """One compiled kernel variant: what Triton's cache key is made of."""

    kernel: str  # "module:function"
    signature: tuple[tuple[str, str], ...]  # (argument, Triton type or "constexpr")
    constexprs: tuple[tuple[str, Any], ...]  # (constexpr argument, value)
    attrs: tuple[tuple[str, str], ...]  # (argument, specialization: "D" divisible by 16 ..)
    num_warps: int
    num_stages: int
    fn: Any = field(compare=False, hash=False, repr=False)  # the JITFunction
    args: tuple = field(compare=False, hash=False, repr=False)  # as launched (meta tensors)
    kwargs: dict = field(compare=False, hash=False, repr=False)

    @property
    def config(self) -> tuple:
        """What a config choice decides (no argument specializations): the CI dedup key."""
        return (self.kernel, self.constexprs, self.num_warps, self.num_stages)

    def describe(self) -> str:
        consts = " ".join(f"{k}={v}" for k, v in self.constexprs)
        name = self.kernel.split(":")[1]
        return f"{name} {consts} warps={self.num_warps} stages={self.num_stages}"


# argument specializations do not depend on the NVIDIA arch: one backend reads them all
_BACKEND = make_backend(GPUTarget("cuda", 86, 32))
_DEFAULTS = _BACKEND.parse_options({})  # num_warps / num_stages of a launch that names none


@functools.cache
def _binder(fn: Any) -> Any:
    return jit.create_function_from_signature(fn.signature, fn.params, _BACKEND)


def _launch_of(fn: Any, args: tuple, kwargs: dict) -> Launch:
    _, spec, _ = _binder(fn)(*args, **kwargs)
    names = [p.name for p in fn.params]
    consts = {p.name for p in fn.params if p.is_constexpr}
    bound = dict(zip(names, args, strict=False)) | {k: v for k, v in kwargs.items() if k in names}
    for p in fn.params:  # defaults of constexprs left out of the call
        if p.name not in bound and p.is_constexpr:
            bound[p.name] = p.default
    return Launch(
        kernel=f"{fn.fn.__module__}:{fn.fn.__name__}",
        signature=tuple((n, s[0]) for n, s in zip(names, spec, strict=True)),
        constexprs=tuple((n, bound[n]) for n in names if n in consts),
        attrs=tuple((n, str(s[1])) for n, s in zip(names, spec, strict=True) if n not in consts),
        num_warps=kwargs.get("num_warps", _DEFAULTS.num_warps),
        num_stages=kwargs.get("num_stages", _DEFAULTS.num_stages),
        fn=fn,
        args=args,
        kwargs=kwargs,
    )


@contextlib.contextmanager
def capture() -> Iterator[list[Launch]]:
    """Inside, Triton kernels do not run: each launch is appended to the yielded list."""
    launches: list[Launch] = []
    run = jit.JITFunction.run

    def record(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        launches.append(_launch_of(self, args, kwargs))

    jit.JITFunction.run = record
    try:
        yield launches
    finally:
        jit.JITFunction.run = run
