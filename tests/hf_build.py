"""Test helper: a Hugging Face fp16 model folder built from a real GGUF llama model.

Every tensor is dequantized (gguf-exact torch dequantizer) and stored as fp16 under its HF
name; Q/K rows are un-permuted from llama.cpp's interleaved-RoPE layout back to HF's half
split (the inverse of `permute` in llama.cpp's convert_hf_to_gguf.py); config.json,
tokenizer.json (built with the `tokenizers` library from the GGUF vocabulary),
tokenizer_config.json and generation_config.json are written as transformers writes them.
The weights go into two shards with an index, as large checkpoints are stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors
from tokenizers import pre_tokenizers as pre

from localllm.config import ModelConfig
from localllm.formats.gguf import GGUFFile
from localllm.formats.gguf_config import model_config_from_gguf
from localllm.formats.quants import dequantize_tensor
from localllm.sources.hf_entries import hf_name
from localllm.tokenizer.vocab import TokenType

SPACE = "\u2581"


def unpermute(w: torch.Tensor, n_head: int) -> torch.Tensor:
    """[n_head * head_dim, D] rows from GGUF's (pair-interleaved) order to HF's (half split)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_tensors(g: GGUFFile, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    out = {}
    for name, raw in g.tensors.items():
        w = dequantize_tensor(raw)  # float32, GGUF's exact values
        if name.endswith("attn_q.weight"):
            w = unpermute(w, cfg.n_heads)
        elif name.endswith("attn_k.weight"):
            w = unpermute(w, cfg.n_kv_heads)
        out[hf_name(name)] = w.to(torch.float16).contiguous()
    return out


def _save_sharded(tensors: dict[str, torch.Tensor], out: Path) -> None:
    names = sorted(tensors)
    half = len(names) // 2
    weight_map = {}
    for i, part in enumerate((names[:half], names[half:])):
        file = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, out / file, metadata={"format": "pt"})
        weight_map.update({n: file for n in part})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def config_json(g: GGUFFile, cfg: ModelConfig) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": cfg.dim,
        "intermediate_size": cfg.ffn_dim,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "max_position_embeddings": cfg.context_length,
        "rms_norm_eps": cfg.rms_eps,
        "rope_theta": cfg.rope_theta,
        "vocab_size": cfg.vocab_size,
        "tie_word_embeddings": cfg.tie_embeddings,
        "hidden_act": "silu",
        "torch_dtype": "float16",
        "bos_token_id": g.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": g.get("tokenizer.ggml.eos_token_id"),
    }


# ---------------------------------------------------------------------------- tokenizer.json

# llama.cpp's `tokenizer.ggml.pre` -> the HF pre-tokenizer those models ship with
_BPE_PRE = {
    "smollm": lambda: pre.Sequence(
        [pre.Digits(individual_digits=True), pre.ByteLevel(add_prefix_space=False)]
    ),
    "gpt-2": lambda: pre.ByteLevel(add_prefix_space=False),
}


def _bpe_tokenizer(md: dict[str, Any]) -> Tokenizer:
    tokens = md["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in md["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = _BPE_PRE[md["tokenizer.ggml.pre"]]()
    tok.decoder = decoders.ByteLevel()
    return tok


def _spm_merges(tokens: list[str], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    """SentencePiece's merge order as BPE merges: every split of a piece into two pieces,
    ranked by the merged piece's score (what transformers' SentencePieceExtractor does)."""
    ids = {t: i for i, t in enumerate(tokens)}
    ranked = []
    for t, i in ids.items():
        if types[i] != TokenType.NORMAL:
            continue
        for cut in range(1, len(t)):
            a, b = t[:cut], t[cut:]
            if a in ids and b in ids:
                ranked.append((-scores[i], ids[a], ids[b], a, b))
    return [(a, b) for *_, a, b in sorted(ranked)]


def _spm_tokenizer(md: dict[str, Any]) -> Tokenizer:
    tokens, types = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"]
    merges = _spm_merges(tokens, md["tokenizer.ggml.scores"], types)
    unk = tokens[md.get("tokenizer.ggml.unknown_token_id", 0)]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, merges, unk_token=unk, byte_fallback=True, fuse_unk=True))
    steps = [normalizers.Replace(" ", SPACE)]
    if md.get("tokenizer.ggml.add_space_prefix", True):
        steps.insert(0, normalizers.Prepend(SPACE))
    tok.normalizer = normalizers.Sequence(steps)
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace(SPACE, " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    return tok


def tokenizer_json(g: GGUFFile) -> Tokenizer:
    md = g.metadata
    tok = _spm_tokenizer(md) if md["tokenizer.ggml.model"] == "llama" else _bpe_tokenizer(md)
    tokens, types = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"]
    tok.add_special_tokens(
        [
            AddedToken(t, special=True, normalized=False)
            for t, k in zip(tokens, types)
            if k == TokenType.CONTROL
        ]
    )
    tok.add_tokens(
        [
            AddedToken(t, normalized=False)
            for t, k in zip(tokens, types)
            if k == TokenType.USER_DEFINED
        ]
    )
    bos = md.get("tokenizer.ggml.bos_token_id")
    if md.get("tokenizer.ggml.add_bos_token") and bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{tokens[bos]} $A",
            pair=f"{tokens[bos]} $A $B",
            special_tokens=[(tokens[bos], bos)],
        )
    elif md["tokenizer.ggml.model"] == "gpt2":
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def tokenizer_config(g: GGUFFile) -> dict[str, Any]:
    md = g.metadata
    tokens = md["tokenizer.ggml.tokens"]
    out: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast"}
    for key, gkey in (("bos", "bos"), ("eos", "eos"), ("unk", "unknown")):
        i = md.get(f"tokenizer.ggml.{gkey}_token_id")
        if i is not None:
            out[f"{key}_token"] = tokens[i]
    out["add_bos_token"] = bool(md.get("tokenizer.ggml.add_bos_token", False))
    if md.get("tokenizer.chat_template"):
        out["chat_template"] = md["tokenizer.chat_template"]
    return out


def write_tokenizer_files(g: GGUFFile, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tokenizer_json(g).save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(g), indent=2))
    gen = {k: g.get(f"tokenizer.ggml.{k}") for k in ("bos_token_id", "eos_token_id")}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2))


def build_hf_folder(gguf_path: str | Path, out: Path) -> Path:
    """Write the fp16 HF folder of a GGUF llama model into `out` (created); returns it."""
    g = GGUFFile(gguf_path)
    cfg = model_config_from_gguf(g)
    assert cfg.arch == "llama" and cfg.rope_style == "interleaved", "llama GGUF files only"
    out.mkdir(parents=True, exist_ok=True)
    _save_sharded(hf_tensors(g, cfg), out)
    (out / "config.json").write_text(json.dumps(config_json(g, cfg), indent=2))
    write_tokenizer_files(g, out)
    return out


# ------------------------------------------------------------- tiny random folders (transformers)

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_tokenizer(vocab_size: int) -> Tokenizer:
    """Byte-level BPE over the 256 byte symbols, a few merges and ChatML specials."""
    from localllm.tokenizer.bpe import byte_alphabet

    alphabet = list(byte_alphabet())
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n")]
    vocab = {c: i for i, c in enumerate(alphabet)}
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in _SPECIALS])
    assert tok.get_vocab_size() <= vocab_size
    return tok


def write_tiny_hf(out: Path, arch: str, **overrides: Any) -> Path:
    """A random-weight transformers checkpoint of `arch` ("LlamaForCausalLM", ...) with a
    byte-level tokenizer and a ChatML template, saved as transformers saves it."""
    import transformers

    cfg_cls = getattr(transformers, arch.replace("ForCausalLM", "Config"))
    fields = dict(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=262,
    )
    fields.update(overrides)
    torch.manual_seed(0)
    model = getattr(transformers, arch)(cfg_cls(**fields)).to(torch.float16)
    with torch.no_grad():  # random norms: a norm of ones hides a wrong mapping
        for name, p in model.named_parameters():
            if name.endswith(("norm.weight", "bias")):
                p.copy_(
                    1 + 0.2 * torch.randn_like(p) if "norm" in name else 0.5 * torch.randn_like(p)
                )
    model.save_pretrained(out, safe_serialization=True)
    byte_tokenizer(fields["vocab_size"]).save(str(out / "tokenizer.json"))
    tok_cfg = {"eos_token": "<|im_end|>", "chat_template": CHATML}
    (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    return out


# ---------------------------------------------------------------------------------- AWQ

AWQ_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def quantize_folder(src: Path, out: Path, group: int = 128) -> Path:
    """The AWQ (GEMM, 4-bit, zero point) copy of an fp16 folder: every decoder linear
    round-to-nearest quantized (`formats/awq.quantize`, AutoAWQ's packing), embeddings, norms
    and the LM head kept, as AutoAWQ leaves them; one shard."""
    from safetensors.torch import load_file

    from localllm.formats import awq

    out.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(src.glob("*.safetensors")):
        for name, t in load_file(shard).items():
            module, _, kind = name.rpartition(".")
            if kind == "weight" and module.rsplit(".", 1)[-1] in AWQ_LINEARS:
                qw, qz, s = awq.quantize(t, group)
                tensors.update(
                    {f"{module}.qweight": qw, f"{module}.qzeros": qz, f"{module}.scales": s}
                )
            else:
                tensors[name] = t
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((src / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "awq", "version": "gemm", "bits": 4,
                                  "group_size": group, "zero_point": True, "modules_to_not_convert": None}  # fmt: skip
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if (src / f).exists():
            (out / f).write_bytes((src / f).read_bytes())
    return out
