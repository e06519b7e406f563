"""Open a GGUF file memory-mapped through the `gguf` library and expose zero-copy tensors.

Tensor shapes are given in torch order (rows first): a GGUF `[ne0=cols, ne1=rows]` weight
becomes `(rows, cols)`. Quantized tensors are `uint8` arrays of shape `[rows, row_bytes]`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType

from localllm.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class RawTensor:
    name: str
    qtype: GGMLQuantizationType
    shape: tuple[int, ...]  # torch order: (rows, cols) for matrices, (n,) for vectors
    data: np.ndarray  # memory-mapped view; uint8 [rows, row_bytes] when quantized

    @property
    def qname(self) -> str:
        return self.qtype.name

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


def _field_value(field: Any) -> Any:
    """Decode one GGUF metadata field into plain Python (str, int, float, bool, list)."""
    types = field.types
    if not types:
        return None
    if types[0] == GGUFValueType.ARRAY:
        sub = types[-1] if len(types) > 1 else None
        if sub == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8", errors="replace") for i in field.data]
        if sub == GGUFValueType.ARRAY:
            return field.contents()
        # numeric arrays: one numpy concat, much faster than per-element python for 150k vocabs
        if not field.data:
            return []
        return np.concatenate([field.parts[i] for i in field.data]).tolist()
    if types[0] == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")
    value = field.parts[field.data[0]][0]
    if types[0] == GGUFValueType.BOOL:
        return bool(value)
    return value.item()


def _check_header(path: str) -> None:
    if not os.path.exists(path):
        raise ModelLoadError(path, "no such file")
    if os.path.isdir(path):
        raise ModelLoadError(path, "is a directory, expected a .gguf file")
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ModelLoadError(path, f"cannot read file ({e.strerror})") from None
    if magic != GGUF_MAGIC:
        raise ModelLoadError(path, "not a GGUF file (bad magic bytes)")


class GGUFFile:
    """A GGUF model file: decoded metadata and memory-mapped tensors (nothing is copied)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        _check_header(self.path)
        try:
            reader = GGUFReader(self.path, "r")
        except Exception as e:  # the gguf library raises ValueError/IndexError/... on corrupt files
            raise ModelLoadError(self.path, f"corrupt or truncated GGUF ({_short(e)})") from None
        self._reader = reader
        self.metadata: dict[str, Any] = {}
        for name, field in reader.fields.items():
            if name.startswith("GGUF."):
                continue
            try:
                self.metadata[name] = _field_value(field)
            except Exception as e:
                raise ModelLoadError(self.path, f"unreadable metadata key {name!r} ({_short(e)})") from None
        self.tensors: dict[str, RawTensor] = {}
        for t in reader.tensors:
            shape = tuple(int(x) for x in reversed(t.shape.tolist()))
            self.tensors[t.name] = RawTensor(t.name, GGMLQuantizationType(t.tensor_type), shape, t.data)
            self._check_size(t.name, t.tensor_type, shape, t.data)

    def _check_size(self, name: str, qtype: int, shape: tuple[int, ...], data: np.ndarray) -> None:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
        n = int(np.prod(shape))
        if n % block:
            raise ModelLoadError(self.path, f"tensor {name!r} has {n} elements, not a multiple of {block}")
        if data.nbytes != n // block * type_size:
            raise ModelLoadError(self.path, f"tensor {name!r} is truncated")

    @property
    def arch(self) -> str:
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str):
            raise ModelLoadError(self.path, "missing general.architecture")
        return arch

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def require(self, key: str) -> Any:
        if key not in self.metadata:
            raise ModelLoadError(self.path, f"missing metadata key {key!r}")
        return self.metadata[key]

    def tensor(self, name: str) -> RawTensor:
        if name not in self.tensors:
            raise ModelLoadError(self.path, f"missing tensor {name!r}")
        return self.tensors[name]

    @property
    def file_size(self) -> int:
        return os.path.getsize(self.path)


def _short(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}"[:200] if msg else type(e).__name__


def open_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    return GGUFFile(path)
