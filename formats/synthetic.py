"""Synthetic GGUF models: real architecture shapes, random weights (benchmarks and tests).

Speed does not depend on weight values, so the benchmark models of ANCHORS.md are written with
uniform random quantized blocks whose fp16 scale fields are all `quant_scale` (0.002), F32 norms
and a SentencePiece vocabulary padded to the model's size. The same writer makes tiny random
models of any supported architecture and quant type for tests. Tensors are generated and
written one at a time through `gguf.GGUFWriter`, so memory stays at one tensor.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType, GGUFWriter

from localllm.formats.quants import LAYOUTS

# re-exported: tests and the bench import the rules and vocabularies from here
from localllm.formats.synthetic_rules import Q as Q
from localllm.formats.synthetic_rules import TypeRule as TypeRule
from localllm.formats.synthetic_rules import UniformRule as UniformRule
from localllm.formats.synthetic_rules import file_type_for as file_type_for
from localllm.formats.synthetic_rules import q4_k_m_rule as q4_k_m_rule
from localllm.formats.synthetic_rules import use_more_bits as use_more_bits
from localllm.formats.synthetic_vocab import Vocab as Vocab
from localllm.formats.synthetic_vocab import byte_vocab as byte_vocab
from localllm.formats.synthetic_vocab import load_vocab as load_vocab
from localllm.model.registry import ARCHS


@dataclass(frozen=True)
class SyntheticSpec:
    name: str
    vocab: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn: int
    tensor_type: TypeRule = UniformRule(Q.F32)
    rope_theta: float = 500000.0
    arch: str = "llama"
    head_dim: int | None = None  # None: dim // n_heads
    qkv_bias: bool | None = None  # None: as the arch has it (qwen2)
    qk_norm: bool | None = None  # None: as the arch has it (qwen3)
    tie_embeddings: bool = False  # no output.weight; the head reuses token_embd
    context_length: int = 4096
    rms_eps: float = 1e-5
    rope_scaling: Mapping[str, str | int | float] = field(
        default_factory=dict
    )  # {arch}.rope.scaling.*
    file_type: int | None = None  # None: from the type of blk.0.attn_q
    quant_scale: float = 0.002  # every fp16 scale field (d, dmin/m) of every quantized block
    weight_std: float = 0.02  # float weights ~ N(0, std); norms ~ 1 + N(0, std)

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"unknown arch {self.arch!r} (known: {', '.join(ARCHS)})")
        for k in ("vocab", "dim", "n_layers", "n_heads", "n_kv_heads", "ffn"):
            if getattr(self, k) <= 0:
                raise ValueError(f"{k} must be positive")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}"
            )
        if self.head_dim is None:
            if self.dim % self.n_heads:
                raise ValueError(f"dim {self.dim} is not a multiple of n_heads {self.n_heads}")
            object.__setattr__(self, "head_dim", self.dim // self.n_heads)
        traits = ARCHS[self.arch]
        if self.qkv_bias is None:
            object.__setattr__(self, "qkv_bias", traits.qkv_bias)
        if self.qk_norm is None:
            object.__setattr__(self, "qk_norm", traits.qk_norm)

    @property
    def hd(self) -> int:
        assert self.head_dim is not None
        return self.head_dim


@dataclass(frozen=True)
class PlannedTensor:
    name: str
    shape: tuple[int, ...]  # torch order: (rows, cols) or (n,)
    qtype: GGMLQuantizationType

    @property
    def nbytes(self) -> int:
        lay = LAYOUTS[self.qtype]
        return int(np.prod(self.shape)) // lay.block_size * lay.type_size


def _layer_tensors(s: SyntheticSpec, i: int) -> list[tuple[str, tuple[int, ...]]]:
    q, kv = s.n_heads * s.hd, s.n_kv_heads * s.hd
    out: list[tuple[str, tuple[int, ...]]] = [("attn_norm.weight", (s.dim,))]
    out += [
        ("attn_q.weight", (q, s.dim)),
        ("attn_k.weight", (kv, s.dim)),
        ("attn_v.weight", (kv, s.dim)),
    ]
    if s.qkv_bias:
        out += [("attn_q.bias", (q,)), ("attn_k.bias", (kv,)), ("attn_v.bias", (kv,))]
    if s.qk_norm:
        out += [("attn_q_norm.weight", (s.hd,)), ("attn_k_norm.weight", (s.hd,))]
    out += [("attn_output.weight", (s.dim, q)), ("ffn_norm.weight", (s.dim,))]
    out += [("ffn_gate.weight", (s.ffn, s.dim)), ("ffn_up.weight", (s.ffn, s.dim))]
    return out + [("ffn_down.weight", (s.dim, s.ffn))]


def _planned(
    s: SyntheticSpec, name: str, shape: tuple[int, ...], layer: int | None
) -> PlannedTensor:
    if len(shape) == 1:
        return PlannedTensor(name, shape, Q.F32)
    kind = name.split(".")[-2]
    qtype = s.tensor_type(kind, layer, s.n_layers)
    block = LAYOUTS[qtype].block_size if qtype in LAYOUTS else 0
    if not block or shape[1] % block:
        raise ValueError(
            f"{name}: {qtype.name} needs rows of whole {block}-element blocks, got {shape[1]}"
        )
    return PlannedTensor(name, shape, qtype)


def plan_tensors(s: SyntheticSpec) -> list[PlannedTensor]:
    """Every tensor of the model, in file order, with its type from the spec's rule."""
    plan = [_planned(s, "token_embd.weight", (s.vocab, s.dim), None)]
    for i in range(s.n_layers):
        plan += [_planned(s, f"blk.{i}.{n}", shape, i) for n, shape in _layer_tensors(s, i)]
    plan.append(_planned(s, "output_norm.weight", (s.dim,), None))
    if not s.tie_embeddings:
        plan.append(_planned(s, "output.weight", (s.vocab, s.dim), None))
    return plan


# ---- writing -------------------------------------------------------------------------------


def _add_kv(w: GGUFWriter, key: str, v: Any) -> None:
    if isinstance(v, str):
        w.add_string(key, v)
    elif isinstance(v, bool):
        w.add_bool(key, v)
    elif isinstance(v, int):
        w.add_uint32(key, v)
    else:
        w.add_float32(key, float(v))


# (GGUFWriter method, spec attribute): the {arch}.* hyper-parameters llama.cpp reads
_HPARAMS = [
    ("add_vocab_size", "vocab"),
    ("add_context_length", "context_length"),
    ("add_embedding_length", "dim"),
    ("add_block_count", "n_layers"),
    ("add_feed_forward_length", "ffn"),
    ("add_head_count", "n_heads"),
    ("add_head_count_kv", "n_kv_heads"),
    ("add_key_length", "head_dim"),
    ("add_value_length", "head_dim"),
    ("add_rope_dimension_count", "head_dim"),
    ("add_rope_freq_base", "rope_theta"),
    ("add_layer_norm_rms_eps", "rms_eps"),
]


def _add_metadata(w: GGUFWriter, s: SyntheticSpec, vocab: Vocab) -> None:
    w.add_name(s.name)
    ft = (
        s.file_type
        if s.file_type is not None
        else file_type_for(s.tensor_type("attn_q", 0, s.n_layers))
    )
    w.add_file_type(ft)
    w.add_quantization_version(2)
    for method, attr in _HPARAMS:
        getattr(w, method)(getattr(s, attr))
    for k, v in s.rope_scaling.items():
        _add_kv(w, f"{s.arch}.rope.scaling.{k}", v)
    w.add_tokenizer_model(vocab.model)
    w.add_token_list(vocab.tokens)
    w.add_token_scores(vocab.scores)
    w.add_token_types(vocab.types)
    if vocab.merges:
        w.add_token_merges(vocab.merges)
    for k, v in vocab.special.items():
        _add_kv(w, f"tokenizer.ggml.{k}", v)


def _random_tensor(t: PlannedTensor, rng: np.random.Generator, s: SyntheticSpec) -> np.ndarray:
    """The payload of one tensor: float32/float16 array, or uint8 [rows, row_bytes] blocks."""
    if t.qtype in (Q.F32, Q.F16, Q.BF16):
        x = rng.standard_normal(t.shape, dtype=np.float32) * np.float32(s.weight_std)
        if t.name.endswith("norm.weight"):
            x += np.float32(1.0)
        if t.qtype == Q.BF16:  # truncate to the top 16 bits, as raw bytes
            return (x.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
        return x if t.qtype == Q.F32 else x.astype(np.float16)
    lay = LAYOUTS[t.qtype]
    words = rng.bit_generator.random_raw(-(-t.nbytes // 8))  # uniform bytes, ~2 GB/s
    blocks = words.view(np.uint8)[: t.nbytes].view(np.uint16).reshape(-1, lay.type_size // 2)
    scale_bits = np.float16(s.quant_scale).view(np.uint16)
    for off in lay.f16_fields:  # every block layout has even sizes and offsets
        blocks[:, off // 2] = scale_bits
    return blocks.view(np.uint8).reshape(t.shape[0], -1)


def _writer(s: SyntheticSpec, path: Path, vocab: Vocab, plan: list[PlannedTensor]) -> GGUFWriter:
    w = GGUFWriter(path, s.arch)
    _add_metadata(w, s, vocab)
    for t in plan:
        quant = t.qtype not in (Q.F32, Q.F16)
        dtype = np.dtype(np.uint8 if quant else np.float32 if t.qtype == Q.F32 else np.float16)
        shape = (t.shape[0], t.nbytes // t.shape[0]) if quant else t.shape
        w.add_tensor_info(t.name, shape, dtype, t.nbytes, raw_dtype=t.qtype if quant else None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    return w


def _vocab_for(s: SyntheticSpec, vocab_gguf: str | os.PathLike[str] | None) -> Vocab:
    return (load_vocab(vocab_gguf) if vocab_gguf is not None else byte_vocab()).padded(s.vocab)


def write_synthetic(
    spec: SyntheticSpec,
    path: str | os.PathLike[str],
    seed: int = 0,
    vocab_gguf: str | os.PathLike[str] | None = None,
) -> Path:
    """Write `spec` as a GGUF file, streaming one random tensor at a time. Without `vocab_gguf`
    the tokenizer is `byte_vocab()`; either way it is padded with unused tokens to spec.vocab."""
    path = Path(path)
    part = path.with_name(path.name + ".part")  # never leave a half-written file at `path`
    plan = plan_tensors(spec)
    rng = np.random.default_rng(seed)
    w = _writer(spec, part, _vocab_for(spec, vocab_gguf), plan)
    try:
        for t in plan:
            w.write_tensor_data(_random_tensor(t, rng, spec))
    finally:
        w.close()
    os.replace(part, path)
    return path


def planned_file_size(spec: SyntheticSpec, vocab_gguf: str | os.PathLike[str] | None = None) -> int:
    """Exact size in bytes of what write_synthetic writes (only the header is written, to a
    temporary file; tensor data is accounted for, not generated)."""
    plan = plan_tensors(spec)
    with tempfile.TemporaryDirectory() as tmp:
        w = _writer(spec, Path(tmp) / "h.gguf", _vocab_for(spec, vocab_gguf), plan)
        assert w.fout is not None
        header = w.fout[0].tell()
        w.close()
    align = GGUF_DEFAULT_ALIGNMENT
    pad = lambda n: -(-n // align) * align
    return pad(header) + sum(pad(t.nbytes) for t in plan)


SPECS: dict[str, SyntheticSpec] = {
    "llama2-7b-q4_0": SyntheticSpec(
        "llama2-7b-q4_0",
        vocab=32000,
        dim=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=32,
        ffn=11008,
        tensor_type=UniformRule(Q.Q4_0, output=Q.Q6_K),
        context_length=4096,
    ),
    "llama3-8b-q4_k_m": SyntheticSpec(
        "llama3-8b-q4_k_m",
        vocab=128256,
        dim=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn=14336,
        tensor_type=q4_k_m_rule,
        context_length=8192,
    ),
}
