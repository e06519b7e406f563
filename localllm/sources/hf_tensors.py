"""The tensors of a Hugging Face folder under the engine's (GGUF) names, memory-mapped.

Shards are opened with the `safetensors` library (`safe_open`, framework "pt"): a tensor is a
view of the mapped file, nothing is read until the loader touches it. Names are translated
by one table (`hf_entries`), in both directions, so errors name the tensor as the folder
spells it; AWQ linears (`hf_quant`) become one AWQTensor each. The set of tensors is checked against the architecture's layout
(`formats/gguf_tensors.TENSOR_LAYOUTS`, the same table the GGUF reader uses).
"""

from __future__ import annotations

from pathlib import Path

import torch
from gguf import GGMLQuantizationType as QT
from safetensors import safe_open

from localllm.config import ModelConfig
from localllm.errors import ModelLoadError
from localllm.formats.awq import AWQTensor
from localllm.formats.gguf import RawTensor
from localllm.formats.gguf_tensors import TENSOR_LAYOUTS
from localllm.sources.hf_entries import (
    IGNORED,
    OUR_LAYER,
    TensorEntry,
    hf_name,
    list_tensors,
    our_name,
)
from localllm.sources.hf_quant import AwqScheme, awq_part, awq_shape

# safetensors dtype -> (GGML type the loader knows, torch dtype, bytes per element)
FLOAT_DTYPES: dict[str, tuple[QT, torch.dtype]] = {
    "F16": (QT.F16, torch.float16),
    "BF16": (QT.BF16, torch.bfloat16),
    "F32": (QT.F32, torch.float32),
}


class SafetensorsTensors:
    """A folder's weights by the engine's tensor names: `tensor(name)` is a RawTensor whose
    data is a zero-copy numpy view of the memory-mapped shard, or for an AWQ linear an
    AWQTensor of its three memory-mapped parts."""

    def __init__(
        self, folder: Path, files: list[Path], cfg: ModelConfig, awq: AwqScheme | None
    ) -> None:
        self.path = str(folder)
        self.entries: dict[str, TensorEntry] = {}
        self.awq_parts: dict[str, dict[str, TensorEntry]] = {}  # name -> qweight/qzeros/scales
        self.awq = awq
        for e in list_tensors(files):
            self._add(e, cfg)
        shapes = {n: e.shape for n, e in self.entries.items()}
        if awq is not None:
            shapes |= {n: awq_shape(p, awq.group, self.path) for n, p in self.awq_parts.items()}
        self._check(cfg, shapes)
        self._handles: dict[Path, object] = {}

    def _add(self, e: TensorEntry, cfg: ModelConfig) -> None:
        quantized = awq_part(e.hf_name)
        name = quantized[0] if quantized else our_name(e.hf_name)
        if name == "output.weight" and cfg.tie_embeddings:
            return  # a saved copy of the tied embedding: HF ignores it too
        if name is None:
            if IGNORED.fullmatch(e.hf_name):
                return
            raise ModelLoadError(
                self.path, f"unexpected tensor {e.hf_name!r} for a {cfg.arch} model"
            )
        if quantized is None:
            self.entries[name] = e
        elif self.awq is None:
            raise ModelLoadError(
                self.path,
                f"tensor {e.hf_name!r} is quantized, but config.json has no quantization_config",
            )
        else:
            self.awq_parts.setdefault(name, {})[quantized[1]] = e
        if name in self.entries and name in self.awq_parts:
            raise ModelLoadError(self.path, f"{hf_name(name)!r} is stored both quantized and not")

    def _check(self, cfg: ModelConfig, shapes: dict[str, tuple[int, ...]]) -> None:
        required, optional = TENSOR_LAYOUTS[cfg.arch](cfg)
        for name, shape in shapes.items():
            shown = hf_name(name) if name in self.awq_parts else self.entries[name].hf_name
            want = required.get(name, optional.get(name))
            if want is None:
                m = OUR_LAYER.fullmatch(name)
                where = f": num_hidden_layers is {cfg.n_layers}" if m else ""
                raise ModelLoadError(self.path, f"unexpected tensor {shown!r}{where}")
            if shape != want:
                raise ModelLoadError(
                    self.path, f"tensor {shown!r} has shape {list(shape)}, expected {list(want)}"
                )
            if name in self.entries and self.entries[name].dtype not in FLOAT_DTYPES:
                raise ModelLoadError(
                    self.path,
                    f"tensor {shown!r} is {self.entries[name].dtype}; expected F16, BF16 or F32",
                )
        if "token_embd.weight" in self.awq_parts:
            raise ModelLoadError(self.path, "a quantized embedding table (AWQ) is not supported")
        missing = [hf_name(n) for n in required if n not in shapes]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ModelLoadError(self.path, f"missing tensor {missing[0]!r}{more}")

    def __contains__(self, name: str) -> bool:
        return name in self.entries or name in self.awq_parts

    @property
    def nbytes(self) -> int:
        parts = [e for p in self.awq_parts.values() for e in p.values()]
        return sum(e.nbytes for e in [*self.entries.values(), *parts])

    def _view(self, e: TensorEntry) -> torch.Tensor:
        handle = self._handles.get(e.file)
        if handle is None:
            handle = self._handles[e.file] = safe_open(e.file, framework="pt")
        return handle.get_tensor(e.hf_name)  # type: ignore[attr-defined]  # a view of the map

    def tensor(self, name: str) -> RawTensor | AWQTensor:
        if name in self.awq_parts and self.awq is not None:
            p = {part: self._view(e) for part, e in self.awq_parts[name].items()}
            n, k = p["scales"].shape[1], p["qweight"].shape[0]
            return AWQTensor(name, (n, k), p["qweight"], p["qzeros"], p["scales"], self.awq.group)
        e = self.entries.get(name)
        if e is None:
            raise ModelLoadError(self.path, f"missing tensor {hf_name(name)!r}")
        t = self._view(e)
        qtype = FLOAT_DTYPES[e.dtype][0]
        # GGUF's convention (RawTensor): F16/F32 as their numpy dtype, BF16 as raw bytes
        data = t.view(torch.uint8).numpy() if qtype == QT.BF16 else t.numpy()
        return RawTensor(name, qtype, e.shape, data)
