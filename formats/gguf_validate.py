"""Checks of a GGUF file's structure that need the whole header: data layout and metadata.

`check_layout` applies llama.cpp's rule (gguf.cpp): tensor data follow each other in the
order of the tensor infos, each padded to the alignment, so every tensor's offset is known
from the sizes of the ones before it. A tensor whose type or shape was changed no longer
tiles the data section, and overlapping or gapped offsets are refused instead of read.

`check_metadata` checks the keys every model file shares (`general.*`, `tokenizer.ggml.*`)
against the GGUF spec's types and ranges; `check_arch_metadata` does the same for the
architecture's hyperparameters (`{arch}.block_count` ...) once the architecture is known to
be supported. Each problem is one ModelLoadError naming the file and the key.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gguf import GGUFValueType, TokenType

from localllm.errors import ModelLoadError

V = GGUFValueType
_INTS = frozenset({V.UINT8, V.INT8, V.UINT16, V.INT16, V.UINT32, V.INT32, V.UINT64, V.INT64})
_FLOATS = frozenset({V.FLOAT32, V.FLOAT64})
# what a value of each kind may be stored as
_KINDS: dict[str, frozenset[GGUFValueType]] = {
    "int": _INTS,
    "float": _FLOATS,
    "str": frozenset({V.STRING}),
    "bool": frozenset({V.BOOL}),
}
ValueType = tuple[int, int | None]  # (value type, array element type or None)


@dataclass(frozen=True)
class KeySpec:
    """The spec's type of a metadata value and the range we accept for it."""

    kind: str  # "int" | "float" | "str" | "bool"
    array: str = "no"  # "no" | "yes" (an array of `kind`) | "either" (scalar or per layer)
    lo: int | None = None  # ints: inclusive bounds
    hi: int | None = None
    gt: float | None = None  # floats: exclusive bounds (a bounded float must be finite)
    lt: float | None = None


_U32 = (1 << 32) - 1
_POSITIVE = KeySpec("float", gt=0.0)
GENERAL_KEYS: dict[str, KeySpec] = {
    "general.architecture": KeySpec("str"),
    "general.alignment": KeySpec("int", lo=1, hi=1 << 16),
    "general.name": KeySpec("str"),
    "tokenizer.ggml.model": KeySpec("str"),
    "tokenizer.ggml.pre": KeySpec("str"),
    "tokenizer.ggml.tokens": KeySpec("str", array="yes"),
    "tokenizer.ggml.token_type": KeySpec("int", array="yes", lo=0, hi=max(TokenType)),
    "tokenizer.ggml.scores": KeySpec("float", array="yes"),
    "tokenizer.ggml.merges": KeySpec("str", array="yes"),
    "tokenizer.ggml.add_bos_token": KeySpec("bool"),
    "tokenizer.ggml.add_eos_token": KeySpec("bool"),
    "tokenizer.ggml.add_space_prefix": KeySpec("bool"),
    "tokenizer.chat_template": KeySpec("str"),
}
# special token ids we use: each must name a token of the vocabulary (llama.cpp only warns;
# a wrong BOS/EOS/stop id silently changes every prompt or never stops a generation)
TOKEN_ID_KEYS = tuple(
    f"tokenizer.ggml.{k}_token_id"
    for k in (
        "bos",
        "eos",
        "unknown",
        "eot",
        "eom",
        "fim_pre",
        "fim_suf",
        "fim_mid",
        "fim_pad",
        "fim_rep",
        "fim_sep",
        "prefix",
        "suffix",
        "middle",
    )
)
# `{arch}.` + suffix: hyperparameters (llama.cpp `LLM_KV_*`); per-layer arrays where allowed
ARCH_KEYS: dict[str, KeySpec] = {
    "context_length": KeySpec("int", lo=1, hi=1 << 31),
    "embedding_length": KeySpec("int", lo=1, hi=1 << 20),
    "block_count": KeySpec("int", lo=1, hi=4096),
    "feed_forward_length": KeySpec("int", array="either", lo=1, hi=1 << 22),
    "vocab_size": KeySpec("int", lo=1, hi=_U32),
    "attention.head_count": KeySpec("int", array="either", lo=1, hi=4096),
    "attention.head_count_kv": KeySpec("int", array="either", lo=1, hi=4096),
    "attention.key_length": KeySpec("int", lo=2, hi=4096),
    "attention.value_length": KeySpec("int", lo=2, hi=4096),
    "attention.layer_norm_rms_epsilon": KeySpec("float", gt=0.0, lt=1.0),
    "rope.dimension_count": KeySpec("int", lo=0, hi=4096),
    "rope.freq_base": _POSITIVE,
    "rope.scaling.type": KeySpec("str"),
    "rope.scaling.factor": _POSITIVE,
    "rope.scaling.original_context_length": KeySpec("int", lo=1, hi=1 << 31),
    "rope.scaling.low_freq_factor": _POSITIVE,
    "rope.scaling.high_freq_factor": _POSITIVE,
}


def _type_name(t: ValueType) -> str:
    main, sub = t
    name = V(main).name if main in V._value2member_map_ else f"id {main}"
    if sub is not None:
        return f"{name} of {V(sub).name if sub in V._value2member_map_ else sub}"
    return name


def _check_value(path: str, key: str, spec: KeySpec, value: Any, vtype: ValueType) -> None:
    main, sub = vtype
    allowed = _KINDS[spec.kind]
    is_array = main == V.ARRAY
    ok_shape = (is_array and spec.array != "no") or (not is_array and spec.array != "yes")
    elem = sub if is_array else main
    if not ok_shape or elem not in allowed:
        want = V(next(iter(sorted(allowed)))).name if len(allowed) == 1 else spec.kind
        want = f"an array of {want}" if spec.array == "yes" else want
        raise ModelLoadError(
            path, f"metadata key {key!r} has type {_type_name(vtype)}, expected {want}"
        )
    values = value if is_array else [value]
    problem = _range_problem(spec, values)
    if problem:
        raise ModelLoadError(path, f"metadata key {key!r} {problem}")


def _range_problem(spec: KeySpec, values: list[Any]) -> str | None:
    """Why `values` are out of the spec's range, or None."""
    if not values:
        return None
    if spec.kind == "int":
        lo, hi = min(values), max(values)
        if spec.lo is not None and lo < spec.lo or spec.hi is not None and hi > spec.hi:
            bad = lo if spec.lo is not None and lo < spec.lo else hi
            return f"is {bad}, it must be in [{spec.lo}, {spec.hi}]"
        return None
    if spec.kind != "float":
        return None
    bounded = spec.gt is not None or spec.lt is not None
    for v in values:
        if math.isnan(v) or (bounded and math.isinf(v)):
            return f"is {v}, it must be a finite number"
        if spec.gt is not None and not v > spec.gt or spec.lt is not None and not v < spec.lt:
            upper = "" if spec.lt is None else f" and < {spec.lt:g}"
            return f"is {v:g}, it must be > {spec.gt:g}{upper}"
    return None


def check_metadata(path: str, metadata: dict[str, Any], types: dict[str, ValueType]) -> None:
    """The shared keys against the spec, the vocabulary arrays against each other."""
    for key, spec in GENERAL_KEYS.items():
        if key in metadata:
            _check_value(path, key, spec, metadata[key], types[key])
    alignment = metadata.get("general.alignment")
    if alignment is not None and alignment & (alignment - 1):
        raise ModelLoadError(path, f"general.alignment {alignment} is not a power of two")
    _check_vocab(path, metadata, types)


def _check_vocab(path: str, metadata: dict[str, Any], types: dict[str, ValueType]) -> None:
    tokens = metadata.get("tokenizer.ggml.tokens")
    for key in ("tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
        arr = metadata.get(key)
        if arr is not None and (tokens is None or len(arr) != len(tokens)):
            n = "no" if tokens is None else len(tokens)
            raise ModelLoadError(path, f"{key} has {len(arr)} entries for {n} tokens")
    n_tokens = len(tokens) if tokens is not None else 0
    for key in TOKEN_ID_KEYS:
        if key not in metadata:
            continue
        _check_value(path, key, KeySpec("int"), metadata[key], types[key])
        if not 0 <= metadata[key] < n_tokens:
            raise ModelLoadError(
                path,
                f"{key} is {metadata[key]}, outside the vocabulary of {n_tokens} tokens",
            )


def check_arch_metadata(
    path: str, arch: str, metadata: dict[str, Any], types: dict[str, ValueType]
) -> None:
    """The `{arch}.*` hyperparameters against their types and ranges."""
    prefix = f"{arch}."
    for suffix, spec in ARCH_KEYS.items():
        key = prefix + suffix
        if key in metadata:
            _check_value(path, key, spec, metadata[key], types[key])
    n_layers = metadata.get(prefix + "block_count")
    for suffix, spec in ARCH_KEYS.items():
        value = metadata.get(prefix + suffix)
        if spec.array == "either" and isinstance(value, list) and len(value) != n_layers:
            raise ModelLoadError(
                path, f"{prefix}{suffix} has {len(value)} entries for {n_layers} blocks"
            )


@dataclass(frozen=True)
class Span:
    """Where one tensor's data lies, relative to the start of the data section."""

    name: str
    offset: int
    nbytes: int
    what: str  # "F16 (64,)" for messages


def _pad(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def check_layout(path: str, spans: Sequence[Span], alignment: int, data_bytes: int) -> None:
    """Tensor data tile the data section in order (llama.cpp's rule) and end with the file.

    `data_bytes` is the file size minus the data section's start.
    """
    expected = 0
    prev: Span | None = None
    for s in spans:
        if s.offset != expected:
            raise ModelLoadError(path, _misplaced(s, prev, expected))
        expected += _pad(s.nbytes, alignment)
        prev = s
    if prev is None:
        return
    end = prev.offset + prev.nbytes
    if data_bytes < end:
        raise ModelLoadError(
            path, f"truncated file: tensor {prev.name!r} needs {end - data_bytes} more bytes"
        )
    if data_bytes > expected:
        raise ModelLoadError(
            path,
            f"{data_bytes - expected} bytes follow the last tensor {prev.name!r} "
            f"({prev.what}, {prev.nbytes} bytes): its type or shape does not match its data",
        )


def _misplaced(s: Span, prev: Span | None, expected: int) -> str:
    if prev is None:
        return f"tensor {s.name!r} starts at data offset {s.offset}, expected 0"
    if s.offset < expected:
        return (
            f"tensor {s.name!r} (data offset {s.offset}) overlaps tensor {prev.name!r} "
            f"({prev.what}, {prev.nbytes} bytes from offset {prev.offset})"
        )
    return (
        f"tensor {s.name!r} starts at data offset {s.offset}, but tensor {prev.name!r} "
        f"({prev.what}, {prev.nbytes} bytes from offset {prev.offset}) ends at "
        f"{expected}: a tensor's type, shape or offset does not match the data"
    )
