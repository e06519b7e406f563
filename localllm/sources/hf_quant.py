"""Quantized Hugging Face checkpoints: which `quantization_config` we run, and the AWQ linear
weights of a folder (`<module>.qweight`, `.qzeros`, `.scales`) grouped and shape-checked.

Supported: AutoAWQ's GEMM packing, 4 bits, zero points, group size 128 or 64
(`formats/awq.py`). Everything else (GEMV / GEMV-fast / exllama / marlin packing, other bit
widths, symmetric AWQ, other methods) is refused with what the file says.
`modules_to_not_convert` is honoured by what the file holds: a module stored as a plain
`.weight` loads unquantized, whatever the list says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localllm.errors import ModelLoadError
from localllm.sources.hf_entries import TensorEntry, our_name

PARTS = {"qweight": "I32", "qzeros": "I32", "scales": "F16"}  # AWQ part -> its dtype
AWQ_GROUPS = (128, 64)


@dataclass(frozen=True)
class AwqScheme:
    group: int


def quant_scheme(cfg_json: dict[str, Any], path: str) -> AwqScheme | None:
    """The quantization of a config.json (None: unquantized); what we cannot run is refused."""
    q = cfg_json.get("quantization_config")
    if q is None:
        return None
    if not isinstance(q, dict):
        raise ModelLoadError(path, f"config.json: quantization_config must be an object, got {q!r}")
    method = str(q.get("quant_method", "?")).lower()
    if method != "awq":
        raise ModelLoadError(
            path, f"quantization {method!r} is not supported (only AWQ, 4-bit GEMM)"
        )
    version = str(q.get("version", "gemm")).lower()
    if version != "gemm":
        raise ModelLoadError(
            path, f"AWQ version {version!r} is not supported (only AutoAWQ's GEMM packing)"
        )
    bits = q.get("bits", q.get("w_bit"))
    if bits != 4:
        raise ModelLoadError(path, f"AWQ with {bits} bits is not supported (only 4)")
    group = q.get("group_size", q.get("q_group_size"))
    if group not in AWQ_GROUPS:
        raise ModelLoadError(path, f"AWQ group size {group} is not supported (128 or 64)")
    if q.get("zero_point", True) is not True:
        raise ModelLoadError(path, "AWQ without zero points (zero_point: false) is not supported")
    skip = q.get("modules_to_not_convert")
    if skip is not None and not (isinstance(skip, list) and all(isinstance(m, str) for m in skip)):
        raise ModelLoadError(
            path, f"config.json: modules_to_not_convert must be a list of names, got {skip!r}"
        )
    return AwqScheme(int(group))


def awq_part(hf_name: str) -> tuple[str, str] | None:
    """`model.layers.0.mlp.up_proj.qweight` -> ("blk.0.ffn_up.weight", "qweight")."""
    base, _, part = hf_name.rpartition(".")
    if part not in PARTS:
        return None
    name = our_name(base + ".weight")
    return (name, part) if name is not None else None


def awq_shape(parts: dict[str, TensorEntry], group: int, path: str) -> tuple[int, int]:
    """The (N, K) of one AWQ linear from its three parts, all checked against each other."""
    qw = parts.get("qweight")
    missing = [p for p in PARTS if p not in parts]
    if qw is None or missing:
        some = next(iter(parts.values())).hf_name.rpartition(".")[0]
        raise ModelLoadError(path, f"AWQ module {some!r} has no {missing[0]}")
    base = qw.hf_name.rpartition(".")[0]
    for p, dtype in PARTS.items():
        if parts[p].dtype != dtype:
            raise ModelLoadError(
                path, f"tensor {parts[p].hf_name!r} is {parts[p].dtype}; AWQ {p} is {dtype}"
            )
    if len(qw.shape) != 2:
        raise ModelLoadError(
            path, f"tensor {qw.hf_name!r} has shape {list(qw.shape)}; AWQ qweight is 2-D"
        )
    k, n = qw.shape[0], qw.shape[1] * 8
    if k % group:
        raise ModelLoadError(
            path, f"AWQ module {base!r}: {k} inputs are not whole groups of {group}"
        )
    want = {"qzeros": (k // group, n // 8), "scales": (k // group, n)}
    for p, shape in want.items():
        if parts[p].shape != shape:
            raise ModelLoadError(
                path,
                f"tensor {parts[p].hf_name!r} has shape {list(parts[p].shape)}, expected {list(shape)}",
            )
    return n, k
