"""The one dispatch point between torch references and Triton kernels.

Each kernel module registers its implementations by op name and backend:

    @register("rms_norm", "reference")
    def rms_norm_ref(x, weight, eps): ...

    @register("rms_norm", "triton")
    def rms_norm_triton(x, weight, eps): ...

`Ops("triton").rms_norm(...)` then calls the Triton version. Triton modules are only imported
when Triton is importable, so the reference backend works on a machine without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

BACKENDS = ("reference", "triton")

# modules that register ops; the triton ones are imported only when triton imports
_REFERENCE_MODULES = (
    "localllm.kernels.norm",
    "localllm.kernels.activation",
    "localllm.kernels.rope_kv",
    "localllm.kernels.attention",
    "localllm.kernels.qlinear",
    "localllm.kernels.argmax",
    "localllm.kernels.qkv_rope",
)
_TRITON_MODULES = (
    "localllm.kernels.norm_triton",
    "localllm.kernels.activation_triton",
    "localllm.kernels.rope_kv_triton",
    "localllm.kernels.attention_triton",
    "localllm.kernels.qlinear_triton",
    "localllm.kernels.argmax_triton",
    "localllm.kernels.qkv_rope_triton",
)

_IMPLS: dict[str, dict[str, Callable[..., Any]]] = {}
_loaded: set[str] = set()


def register(op: str, backend: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}")

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        _IMPLS.setdefault(op, {})[backend] = fn
        return fn

    return deco


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return True


def _load(backend: str) -> None:
    if backend in _loaded:
        return
    mods = _REFERENCE_MODULES if backend == "reference" else _TRITON_MODULES
    for name in mods:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            # a module not written yet is fine; a missing dependency inside one is not
            if e.name != name:
                raise
    _loaded.add(backend)


def get(op: str, backend: str) -> Callable[..., Any]:
    _load("reference")
    if backend == "triton":
        if not triton_available():
            raise RuntimeError("the triton backend needs the `triton` package")
        _load("triton")
    impls = _IMPLS.get(op, {})
    if backend in impls:
        return impls[backend]
    if "reference" in impls:  # ops without a Triton version run their reference everywhere
        return impls["reference"]
    raise KeyError(f"no implementation of op {op!r}")


def has(op: str, backend: str) -> bool:
    _load("reference")
    if backend == "triton" and triton_available():
        _load("triton")
    return backend in _IMPLS.get(op, {})


class Ops:
    """Attribute access to one backend's ops: `Ops("triton").paged_attention(...)`."""

    def __init__(self, backend: str) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}")
        self.backend = backend
        self._cache: dict[str, Callable[..., Any]] = {}

    def __getattr__(self, op: str) -> Callable[..., Any]:
        if op.startswith("_"):
            raise AttributeError(op)
        fn = self._cache.get(op)
        if fn is None:
            fn = self._cache[op] = get(op, self.backend)
        return fn
