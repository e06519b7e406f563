"""Open a GGUF file memory-mapped and expose decoded metadata and zero-copy tensors.

The header is parsed here rather than by `gguf.GGUFReader`: the library builds one numpy view
per array element, which takes ~1.5 s for a 32K vocabulary (~6 s at 128K). This parser reads
the same layout (the gguf package's constants and type tables) with `struct` straight from the
memory map, checks every read against the file length (so a truncated file is reported with
where it ends), and validates each tensor's type, size, alignment and extent. The checks
that need the whole header (no duplicate keys, the spec's types and ranges of the shared keys,
tensor data tiling the data section) are in `gguf_validate`; the tensors an architecture
needs are checked against its ModelConfig in `gguf_tensors`.

Tensor shapes are given in torch order (rows first): a GGUF `[ne0=cols, ne1=rows]` weight
becomes `(rows, cols)`. Quantized (and BF16) tensors are `uint8` arrays `[rows, row_bytes]`;
F32/F16/F64/I8-I64 tensors are arrays of that numpy dtype.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType, GGUFValueType

from localllm.errors import ModelLoadError
from localllm.formats.gguf_validate import Span, ValueType, check_layout, check_metadata
from localllm.formats.quants import check_supported, qtype_name

GGUF_MAGIC = b"GGUF"
_VERSIONS = (2, 3)  # v1 used 32-bit lengths and is long obsolete
_MAX_DIMS = 4  # GGML_MAX_DIMS

V = GGUFValueType
# scalar value types: struct format (little endian) and the numpy dtype of their arrays
_SCALARS: dict[GGUFValueType, tuple[struct.Struct, type]] = {
    V.UINT8: (struct.Struct("<B"), np.uint8),
    V.INT8: (struct.Struct("<b"), np.int8),
    V.UINT16: (struct.Struct("<H"), np.uint16),
    V.INT16: (struct.Struct("<h"), np.int16),
    V.UINT32: (struct.Struct("<I"), np.uint32),
    V.INT32: (struct.Struct("<i"), np.int32),
    V.UINT64: (struct.Struct("<Q"), np.uint64),
    V.INT64: (struct.Struct("<q"), np.int64),
    V.FLOAT32: (struct.Struct("<f"), np.float32),
    V.FLOAT64: (struct.Struct("<d"), np.float64),
    V.BOOL: (struct.Struct("<?"), np.bool_),
}
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
# element dtype of tensors stored as plain arrays; every other type is exposed as raw bytes
_PLAIN_DTYPES: dict[GGMLQuantizationType, type] = {
    GGMLQuantizationType.F32: np.float32,
    GGMLQuantizationType.F16: np.float16,
    GGMLQuantizationType.F64: np.float64,
    GGMLQuantizationType.I8: np.int8,
    GGMLQuantizationType.I16: np.int16,
    GGMLQuantizationType.I32: np.int32,
    GGMLQuantizationType.I64: np.int64,
}


@dataclass(frozen=True)
class RawTensor:
    name: str
    qtype: GGMLQuantizationType
    shape: tuple[int, ...]  # torch order: (rows, cols) for matrices, (n,) for vectors
    data: np.ndarray  # memory-mapped, read-only; uint8 [rows, row_bytes] when quantized

    @property
    def qname(self) -> str:
        return self.qtype.name

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


@dataclass(frozen=True)
class _TensorInfo:
    name: str
    dims: tuple[int, ...]  # GGUF order: ne0 (contiguous) first
    type_id: int
    offset: int  # from the start of the data section


class _Cursor:
    """Bounds-checked little-endian reads from the memory map; `where` names the section."""

    def __init__(self, buf: mmap.mmap, path: str) -> None:
        self.buf, self.path, self.pos, self.size = buf, path, 0, len(buf)
        self.where = "header"

    def take(self, n: int) -> int:
        start, end = self.pos, self.pos + n
        if n < 0 or end > self.size:
            raise ModelLoadError(
                self.path,
                f"truncated file: it ends inside the {self.where} "
                f"(byte {end if n >= 0 else '?'} needed, file has {self.size} bytes)",
            )
        self.pos = end
        return start

    def scalar(self, st: struct.Struct) -> Any:
        return st.unpack_from(self.buf, self.take(st.size))[0]

    def string(self) -> str:
        n = self.scalar(_U64)
        start = self.take(n)
        return self.buf[start : start + n].decode("utf-8", errors="replace")

    def value(self, vtype: int) -> Any:
        if vtype == V.STRING:
            return self.string()
        if vtype == V.ARRAY:
            return self.array()
        try:
            return self.scalar(_SCALARS[V(vtype)][0])
        except (ValueError, KeyError):
            raise ModelLoadError(
                self.path, f"corrupt GGUF: unknown value type {vtype} in the {self.where}"
            ) from None

    def array(self) -> list[Any]:
        sub, n = self.scalar(_U32), self.scalar(_U64)
        if sub == V.STRING:
            return self._strings(n)
        if sub == V.ARRAY:
            return [self.array() for _ in range(n)]
        if sub not in _SCALARS:
            return [self.value(sub)]  # raises the unknown-type error
        dtype = np.dtype(_SCALARS[V(sub)][1]).newbyteorder("<")
        start = self.take(n * dtype.itemsize)
        return np.frombuffer(self.buf, dtype=dtype, count=n, offset=start).tolist()

    def _strings(self, n: int) -> list[str]:
        if n * 8 > self.size - self.pos:  # each string needs at least its 8-byte length
            self.take(n * 8)
        buf, pos, size, unpack = self.buf, self.pos, self.size, _U64.unpack_from
        out: list[str] = []
        for _ in range(n):
            ln = unpack(buf, pos)[0] if pos + 8 <= size else 0
            if pos + 8 + ln > size:
                self.pos = pos
                self.take(8 + ln)  # raises the truncation error
            out.append(buf[pos + 8 : pos + 8 + ln].decode("utf-8", errors="replace"))
            pos += 8 + ln
        self.pos = pos
        return out


def _check_path(path: str) -> None:
    if not os.path.exists(path):
        raise ModelLoadError(path, "no such file")
    if os.path.isdir(path):
        raise ModelLoadError(path, "is a directory, expected a .gguf file")


def _map_file(path: str) -> mmap.mmap:
    try:
        with open(path, "rb") as f:
            if f.read(4) != GGUF_MAGIC:
                raise ModelLoadError(path, "not a GGUF file (bad magic bytes)")
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise ModelLoadError(path, f"cannot read file ({e.strerror or e})") from None


def _read_header(
    cur: _Cursor,
) -> tuple[int, dict[str, Any], dict[str, ValueType], list[_TensorInfo]]:
    cur.take(4)  # magic, checked when mapping
    version = cur.scalar(_U32)
    if version & 0xFFFF == 0 and version:
        raise ModelLoadError(cur.path, "big-endian GGUF files are not supported")
    if version not in _VERSIONS:
        raise ModelLoadError(cur.path, f"unsupported GGUF version {version}")
    n_tensors, n_kv = cur.scalar(_U64), cur.scalar(_U64)
    metadata: dict[str, Any] = {}
    types: dict[str, ValueType] = {}
    for i in range(n_kv):
        cur.where = f"metadata (key #{i})"
        key = cur.string()
        if key in metadata:
            raise ModelLoadError(cur.path, f"corrupt GGUF: duplicate metadata key {key!r}")
        cur.where = f"metadata value of {key!r}"
        vtype = cur.scalar(_U32)
        sub = (
            _U32.unpack_from(cur.buf, cur.pos)[0]
            if vtype == V.ARRAY and cur.pos + 4 <= cur.size
            else None
        )
        metadata[key] = cur.value(vtype)
        types[key] = (vtype, sub)
    infos: list[_TensorInfo] = []
    for i in range(n_tensors):
        cur.where = f"tensor info #{i}"
        name = cur.string()
        n_dims = cur.scalar(_U32)
        if n_dims > _MAX_DIMS:
            raise ModelLoadError(cur.path, f"corrupt GGUF: tensor {name!r} has {n_dims} dims")
        dims = tuple(cur.scalar(_U64) for _ in range(n_dims))
        infos.append(_TensorInfo(name, dims, cur.scalar(_U32), cur.scalar(_U64)))
    return version, metadata, types, infos


class GGUFFile:
    """A GGUF model file: decoded metadata and memory-mapped tensors (nothing is copied).

    With `check_types` (the default) a tensor of a type that `formats.quants` cannot
    dequantize is a ModelLoadError at open time rather than in the middle of loading.
    """

    def __init__(self, path: str | os.PathLike[str], *, check_types: bool = True) -> None:
        self.path = str(path)
        _check_path(self.path)
        self._buf = _map_file(self.path)
        cur = _Cursor(self._buf, self.path)
        try:
            self.version, self.metadata, self.metadata_types, infos = _read_header(cur)
        except (RecursionError, MemoryError, OverflowError, ValueError, struct.error) as e:
            raise ModelLoadError(
                self.path, f"corrupt GGUF in the {cur.where} ({type(e).__name__})"
            ) from None
        check_metadata(self.path, self.metadata, self.metadata_types)
        self.alignment = int(self.metadata.get("general.alignment", GGUF_DEFAULT_ALIGNMENT))
        self.data_offset = -(-cur.pos // self.alignment) * self.alignment
        self.tensors: dict[str, RawTensor] = {}
        spans: list[Span] = []
        for info in infos:
            if info.name in self.tensors:
                raise ModelLoadError(self.path, f"corrupt GGUF: duplicate tensor {info.name!r}")
            if check_types:
                check_supported(info.type_id, self.path, info.name)
            t = self.tensors[info.name] = self._tensor(info)
            spans.append(Span(t.name, info.offset, t.nbytes, f"{t.qname} {t.shape}"))
        check_layout(self.path, spans, self.alignment, len(self._buf) - self.data_offset)

    def _tensor(self, info: _TensorInfo) -> RawTensor:
        name = info.name
        try:
            qtype = GGMLQuantizationType(info.type_id)
        except ValueError:
            raise ModelLoadError(
                self.path, f"unsupported quant type {qtype_name(info.type_id)} in tensor {name!r}"
            ) from None
        block, type_size = GGML_QUANT_SIZES[qtype]
        dims = info.dims or (1,)
        if dims[0] % block:
            raise ModelLoadError(
                self.path,
                f"tensor {name!r} has rows of {dims[0]} elements, "
                f"not a multiple of the {qtype.name} block size {block}",
            )
        n_elems = math.prod(dims)  # python ints: garbage dims cannot overflow
        nbytes = n_elems // block * type_size
        start = self.data_offset + info.offset
        if info.offset % self.alignment:
            raise ModelLoadError(self.path, f"corrupt GGUF: tensor {name!r} data is misaligned")
        if start + nbytes > len(self._buf):
            raise ModelLoadError(
                self.path,
                f"truncated file: tensor {name!r} needs bytes up to "
                f"{start + nbytes}, file has {len(self._buf)}",
            )
        shape = tuple(reversed(dims))  # torch order
        plain = _PLAIN_DTYPES.get(qtype)
        data: np.ndarray
        if plain is not None:
            data = np.frombuffer(self._buf, dtype=plain, count=n_elems, offset=start).reshape(shape)
        else:
            byte_shape = (*shape[:-1], dims[0] // block * type_size)
            data = np.frombuffer(self._buf, dtype=np.uint8, count=nbytes, offset=start)
            data = data.reshape(byte_shape)
        return RawTensor(name, qtype, shape, data)

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
        return len(self._buf)


def open_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    return GGUFFile(path)
