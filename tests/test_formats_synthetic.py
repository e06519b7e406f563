"""formats.synthetic: small random models of each arch, the anchor type rules and file sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, TokenType

from localllm.formats.gguf import GGUFFile
from localllm.formats.quants import LAYOUTS, SUPPORTED_QTYPES, dequantize_tensor
from localllm.formats.synthetic import (
    SPECS,
    SyntheticSpec,
    UniformRule,
    plan_tensors,
    planned_file_size,
    q4_k_m_rule,
    write_synthetic,
)

Q = GGMLQuantizationType


def small(arch: str = "llama", qtype: Q = Q.Q4_K, **kw) -> SyntheticSpec:
    args = dict(
        name=f"tiny-{arch}",
        vocab=300,
        dim=256,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn=512,
        tensor_type=UniformRule(qtype, output=Q.Q6_K),
        arch=arch,
    )
    return SyntheticSpec(**{**args, **kw})


def check_against_spec(g: GGUFFile, spec: SyntheticSpec) -> None:
    a = spec.arch
    assert g.arch == a and g.get("general.name") == spec.name
    expect = {
        "embedding_length": spec.dim,
        "block_count": spec.n_layers,
        "feed_forward_length": spec.ffn,
        "attention.head_count": spec.n_heads,
        "attention.head_count_kv": spec.n_kv_heads,
        "attention.key_length": spec.head_dim,
        "rope.dimension_count": spec.head_dim,
        "vocab_size": spec.vocab,
        "context_length": spec.context_length,
    }
    for key, value in expect.items():
        assert g.require(f"{a}.{key}") == value, key
    assert g.get(f"{a}.rope.freq_base") == pytest.approx(spec.rope_theta)
    assert len(g.get("tokenizer.ggml.tokens")) == spec.vocab
    plan = plan_tensors(spec)
    assert list(g.tensors) == [t.name for t in plan]
    for t in plan:
        raw = g.tensors[t.name]
        assert (raw.qtype, raw.shape, raw.nbytes) == (t.qtype, t.shape, t.nbytes), t.name
    assert g.file_size == planned_file_size(spec)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_small_model_each_arch(tmp_path, arch: str) -> None:
    spec = small(arch, head_dim=128 if arch == "qwen3" else None)
    g = GGUFFile(write_synthetic(spec, tmp_path / f"{arch}.gguf"))
    check_against_spec(g, spec)
    names = set(g.tensors)
    assert ("blk.1.attn_k.bias" in names) == (arch == "qwen2")
    assert ("blk.1.attn_q_norm.weight" in names) == (arch == "qwen3")
    if arch == "qwen2":
        assert g.tensor("blk.0.attn_q.bias").shape == (spec.n_heads * 64,)
    if arch == "qwen3":  # head_dim 128 != dim / n_heads: q is wider than the model
        assert g.tensor("blk.0.attn_k_norm.weight").shape == (128,)
        assert g.tensor("blk.0.attn_q.weight").shape == (512, 256)
        assert g.tensor("blk.0.attn_output.weight").shape == (256, 512)
    assert g.tensor("output.weight").qtype == Q.Q6_K


def test_weights_are_finite_and_scaled(tmp_path) -> None:
    spec = small("qwen2", qtype=Q.Q4_K)
    g = GGUFFile(write_synthetic(spec, tmp_path / "m.gguf", seed=3))
    norm = dequantize_tensor(g.tensor("blk.0.attn_norm.weight"))
    assert (norm - 1).abs().max() < 0.2 and (norm - 1).std() > 0.005
    bias = dequantize_tensor(g.tensor("blk.0.attn_q.bias"))
    assert bias.abs().max() < 0.2 and bias.std() > 0.005
    raw = g.tensor("blk.0.ffn_up.weight")  # every Q4_K block: d = dmin = 0.002
    blocks = raw.data.reshape(-1, LAYOUTS[Q.Q4_K].type_size)
    assert np.all(blocks[:, 0:4].copy().view(np.float16) == np.float16(0.002))
    assert len(np.unique(blocks[:, 16:])) == 256  # payload bytes are random
    w = dequantize_tensor(raw)
    assert torch.isfinite(w).all() and w.abs().max() < 2.0


def test_seed_determinism(tmp_path) -> None:
    spec = small(n_layers=1)
    a = write_synthetic(spec, tmp_path / "a.gguf", seed=1).read_bytes()
    b = write_synthetic(spec, tmp_path / "b.gguf", seed=1).read_bytes()
    c = write_synthetic(spec, tmp_path / "c.gguf", seed=2).read_bytes()
    assert a == b and a != c
    assert not list(tmp_path.glob("*.part"))


@pytest.mark.parametrize(
    "qtype", sorted(SUPPORTED_QTYPES, key=lambda t: t.value), ids=lambda t: t.name
)
def test_every_quant_type_for_2d_weights(tmp_path, qtype: Q) -> None:
    spec = small(qtype=qtype, n_layers=1, tensor_type=UniformRule(qtype), tie_embeddings=True)
    g = GGUFFile(write_synthetic(spec, tmp_path / "m.gguf"))
    check_against_spec(g, spec)
    assert "output.weight" not in g.tensors
    for raw in g.tensors.values():
        assert raw.qtype == (qtype if len(raw.shape) == 2 else Q.F32)
        assert torch.isfinite(dequantize_tensor(raw)).all(), raw.name


def test_rope_scaling_keys(tmp_path) -> None:
    scaling = {
        "type": "llama3",
        "factor": 8.0,
        "original_context_length": 8192,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    }
    spec = small(n_layers=1, rope_scaling=scaling)
    g = GGUFFile(write_synthetic(spec, tmp_path / "m.gguf"))
    for k, v in scaling.items():
        assert g.get(f"llama.rope.scaling.{k}") == v


def test_vocab_from_gguf_is_padded(testdata, tmp_path) -> None:
    src = GGUFFile(testdata / "vocab" / "ggml-vocab-llama-spm.gguf")
    spec = small(vocab=32010, n_layers=1, tensor_type=UniformRule(Q.Q4_0))
    g = GGUFFile(write_synthetic(spec, tmp_path / "m.gguf", vocab_gguf=src.path))
    tokens, types = g.get("tokenizer.ggml.tokens"), g.get("tokenizer.ggml.token_type")
    assert tokens[:32000] == src.get("tokenizer.ggml.tokens")
    assert g.get("tokenizer.ggml.scores")[:32000] == src.get("tokenizer.ggml.scores")
    assert tokens[32009] == "[PAD32009]" and types[32005] == TokenType.UNUSED
    for key in ("model", "bos_token_id", "eos_token_id", "unknown_token_id", "add_bos_token"):
        assert g.get(f"tokenizer.ggml.{key}") == src.get(f"tokenizer.ggml.{key}")
    with pytest.raises(ValueError, match="smaller"):
        write_synthetic(small(vocab=1000), tmp_path / "x.gguf", vocab_gguf=src.path)


def test_spec_checks() -> None:
    with pytest.raises(ValueError, match="arch"):
        small("mamba")
    with pytest.raises(ValueError, match="n_kv_heads"):
        small(n_kv_heads=3)
    with pytest.raises(ValueError, match="blocks"):
        plan_tensors(small(dim=128))  # Q4_K rows need 256-element blocks


def test_q4_k_m_rule_matches_llama_cpp_quantizer(testdata) -> None:
    """pycode-22m-q4_k_m was written by llama.cpp's quantizer: same types per tensor."""
    g = GGUFFile(testdata / "models" / "pycode-22m-q4_k_m.gguf")
    spec = SyntheticSpec(
        "pycode",
        vocab=4096,
        dim=512,
        n_layers=6,
        n_heads=8,
        n_kv_heads=2,
        ffn=1536,
        tensor_type=q4_k_m_rule,
    )
    for t in plan_tensors(spec):
        assert g.tensor(t.name).qtype == t.qtype, t.name


def test_anchor_llama3_q6_k_layers() -> None:
    plan = {t.name: t.qtype for t in plan_tensors(SPECS["llama3-8b-q4_k_m"])}
    six = sorted(i for i in range(32) if plan[f"blk.{i}.attn_v.weight"] == Q.Q6_K)
    # i < 4, i >= 28, or (i - 4) % 3 == 2 (ANCHORS.md)
    assert six == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    assert all((plan[f"blk.{i}.ffn_down.weight"] == Q.Q6_K) == (i in six) for i in range(32))
    assert plan["output.weight"] == Q.Q6_K and plan["token_embd.weight"] == Q.Q4_K
    others = {
        q
        for n, q in plan.items()
        if "attn_v" not in n
        and "ffn_down" not in n
        and n not in ("output.weight",)
        and not n.endswith("norm.weight")
    }
    assert others == {Q.Q4_K}


def test_anchor_llama2_types() -> None:
    plan = plan_tensors(SPECS["llama2-7b-q4_0"])
    types = {(t.name == "output.weight", len(t.shape)): t.qtype for t in plan}
    assert types == {(False, 2): Q.Q4_0, (True, 2): Q.Q6_K, (False, 1): Q.F32}
    assert len(plan) == 2 + 32 * 9 + 1


@pytest.mark.parametrize(
    "name, gb, gib", [("llama2-7b-q4_0", 3.83, 3.56), ("llama3-8b-q4_k_m", 4.92, 4.58)]
)
def test_anchor_file_sizes(testdata, name: str, gb: float, gib: float) -> None:
    size = planned_file_size(
        SPECS[name], vocab_gguf=testdata / "vocab" / "ggml-vocab-llama-spm.gguf"
    )
    assert round(size / 1e9, 2) == gb and round(size / 2**30, 2) == gib
