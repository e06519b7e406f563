"""Test helper: structural edits of a GGUF file through gguf-py's reader and writer.

`rewrite` copies a file key by key and tensor by tensor, with metadata values set, retyped or
dropped and tensors replaced or dropped; the result is a well-formed GGUF whose *content* is
what the test wants. `patch_tensor_info` edits one tensor info in place (type or offset), the
kind of damage a writer cannot produce.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

Q = GGMLQuantizationType
V = GGUFValueType
# (value, type, array element type)
KV = tuple[Any, GGUFValueType, GGUFValueType | None]
TensorEdit = Callable[[str, np.ndarray, Q], tuple[np.ndarray, Q] | None]


def _reader(path: Path) -> GGUFReader:
    st = path.stat()
    return _cached_reader(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _cached_reader(path: str, mtime_ns: int, size: int) -> GGUFReader:
    return GGUFReader(path)


def read_kv(src: Path) -> dict[str, KV]:
    r = _reader(src)
    out: dict[str, KV] = {}
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        sub = f.types[1] if f.types[0] == V.ARRAY else None
        out[key] = (f.contents(), f.types[0], sub)
    return out


def rewrite(
    src: Path,
    dst: Path,
    *,
    kv: dict[str, KV | None] | None = None,
    tensors: TensorEdit | None = None,
    extra_tensors: dict[str, tuple[np.ndarray, Q]] | None = None,
) -> Path:
    """Copy `src` to `dst`: `kv` sets (or with None drops) keys; `tensors(name, data, type)`
    returns a replacement (data, type) or None to drop it; `extra_tensors` are appended."""
    fields = read_kv(src)
    for key, value in (kv or {}).items():
        if value is None:
            fields.pop(key, None)
        else:
            fields[key] = value
    arch = fields.pop("general.architecture", ("llama", V.STRING, None))[0]
    w = GGUFWriter(dst, str(arch))
    for key, (value, vtype, sub) in fields.items():
        w.add_key_value(key, value, vtype, sub)
    for t in _reader(src).tensors:
        item: tuple[np.ndarray, Q] | None = (np.array(t.data), Q(t.tensor_type))
        if tensors is not None:
            item = tensors(t.name, item[0], item[1])
        if item is not None:
            w.add_tensor(t.name, item[0], raw_dtype=item[1])
    for name, (data, qtype) in (extra_tensors or {}).items():
        w.add_tensor(name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def tensor_info_offsets(path: Path) -> dict[str, int]:
    """Byte offset of each tensor info's n_dims field (name, n_dims, dims, type, offset)."""
    data = path.read_bytes()
    r = _reader(path)
    out: dict[str, int] = {}
    pos = 0
    for t in r.tensors:
        name = t.name.encode()
        start = data.index(struct.pack("<Q", len(name)) + name, pos)
        out[t.name] = start + 8 + len(name)
        pos = out[t.name]
    return out


def patch_tensor_info(
    src: Path, dst: Path, name: str, *, qtype: int | None = None, offset: int | None = None
) -> Path:
    """Rewrite the type id and/or the data offset stored in one tensor info."""
    data = bytearray(src.read_bytes())
    at = tensor_info_offsets(src)[name]
    n_dims = struct.unpack_from("<I", data, at)[0]
    type_at = at + 4 + 8 * n_dims
    if qtype is not None:
        struct.pack_into("<I", data, type_at, qtype)
    if offset is not None:
        struct.pack_into("<Q", data, type_at + 4, offset)
    dst.write_bytes(bytes(data))
    return dst


def tensor_data_offset(path: Path, name: str) -> int:
    at = tensor_info_offsets(path)[name]
    data = path.read_bytes()
    n_dims = struct.unpack_from("<I", data, at)[0]
    return struct.unpack_from("<Q", data, at + 8 + 8 * n_dims)[0]


def duplicate_key(src: Path, dst: Path, key: str) -> Path:
    """A file holding `key` twice: the copy is written under a same-length name, then renamed."""
    value, vtype, sub = read_kv(src)[key]
    twin = key[:-1] + ("_" if key[-1] != "_" else "-")
    rewrite(src, dst, kv={twin: (value, vtype, sub)})
    data = dst.read_bytes()
    dst.write_bytes(data.replace(twin.encode(), key.encode(), 1))
    return dst
