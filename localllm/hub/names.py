"""File-name conventions of GGUF repos: quant labels, split shards, projector files (pure).

Quantized GGUF files carry their quantization in the name, as llama.cpp's quantizer and the
big uploaders write it: `Qwen2.5-7B-Instruct-Q4_K_M.gguf`, `model.q8_0.gguf`,
`Q4_K_M/model-Q4_K_M-00001-of-00002.gguf`, `model-UD-Q4_K_XL.gguf`. A repo reference's tag
(`owner/repo:q4_k_m`) is matched against that label, case-insensitively, as `llama.cpp -hf`
and `ollama pull hf.co/...` do.
"""

from __future__ import annotations

import re

# A quant label between separators: Q4_K_M, IQ2_XXS, Q4_0_4_4, TQ1_0, BF16, F16, MXFP4_MOE,
# with the optional "UD-" prefix of Unsloth's dynamic quants.
_QUANT = re.compile(
    r"(?:^|(?<=[-_./]))((?:UD-)?(?:I?Q[1-8](?:_[A-Z0-9]+)*|TQ[12]_0|BF16|FP?16|FP?32|MXFP4(?:_MOE)?))"
    r"(?=$|[-_./])",
    re.IGNORECASE,
)
_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
DEFAULT_QUANT = "Q4_K_M"  # what a reference without a tag picks when the repo has it


def is_gguf_name(name: str) -> bool:
    return name.lower().endswith(".gguf")


def is_projector(name: str) -> bool:
    """Vision projectors (mmproj-*.gguf) sit next to models but are not chat models."""
    return name.rsplit("/", 1)[-1].lower().startswith("mmproj")


def shard_index(name: str) -> tuple[int, int] | None:
    """(index, count) of a split GGUF part `x-00002-of-00003.gguf`, else None."""
    m = _SHARD.search(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def shard_names(first: str) -> list[str]:
    """All part names of the split model whose first part is `first` (itself if not split)."""
    m = _SHARD.search(first)
    if m is None:
        return [first]
    count = int(m.group(2))
    base = first[: m.start()]
    return [f"{base}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


def is_first_part(name: str) -> bool:
    """True for an unsplit file or the first part of a split one."""
    idx = shard_index(name)
    return idx is None or idx[0] == 1


def quant_label(name: str) -> str | None:
    """The quantization named in a GGUF file path, upper-cased (`"Q4_K_M"`), else None."""
    stem = _SHARD.sub("", name)
    stem = stem[: -len(".gguf")] if is_gguf_name(stem) else stem
    found = _QUANT.findall(stem)
    return found[-1].upper() if found else None


def tag_matches(tag: str, label: str | None) -> bool:
    """Does a reference's tag name this label? `q4_k_xl` also matches `UD-Q4_K_XL`."""
    if label is None:
        return False
    tag, label = tag.upper(), label.upper()
    return tag == label or label.removeprefix("UD-") == tag
