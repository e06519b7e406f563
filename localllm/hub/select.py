"""Which files of a Hub repo (or of a cached snapshot) a reference means (pure).

A GGUF pick is one file, or every part of a split model; a repo without GGUF files is taken
as a Hugging Face folder (config, tokenizer and safetensors weights; other weight formats
such as .bin/.pth/.onnx are left out).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from localllm.errors import HubError
from localllm.hub.names import (
    DEFAULT_QUANT,
    is_first_part,
    is_gguf_name,
    is_projector,
    quant_label,
    shard_names,
    tag_matches,
)
from localllm.hub.refs import RepoRef

# the top-level files a Hugging Face model folder needs
FOLDER_PATTERNS = (
    "*.json",
    "*.safetensors",
    "*.jinja",
    "tokenizer.model",
    "*.tiktoken",
    "merges.txt",
    "vocab.txt",
)


@dataclass(frozen=True)
class Selection:
    kind: str  # "gguf" | "folder"
    files: tuple[str, ...]  # repo-relative paths to fetch
    main: str  # the GGUF file to load (first part of a split one); "" for a folder


def _models(files: Iterable[str]) -> list[str]:
    """Loadable GGUF files: first parts only, no vision projectors."""
    return sorted(f for f in files if is_gguf_name(f) and is_first_part(f) and not is_projector(f))


def available_quants(files: Iterable[str]) -> list[str]:
    """Quant labels of the repo's GGUF models (a file without one is listed by name)."""
    return sorted({quant_label(f) or f for f in _models(files)})


def _gguf(ref: RepoRef, main: str, files: set[str]) -> Selection:
    parts = shard_names(main)
    missing = [p for p in parts if p not in files]
    if missing:
        raise HubError(f"{ref}: the split model {main} lacks {', '.join(missing)}")
    return Selection("gguf", tuple(parts), main)


def _by_file(ref: RepoRef, files: set[str]) -> Selection:
    name = ref.filename or ""
    if name not in files:
        same = [f for f in files if f.lower() == name.lower()]
        if len(same) != 1:
            have = ", ".join(_models(files)) or "none"
            raise HubError(f"{ref.repo_id} has no file {name} (its GGUF files: {have})")
        name = same[0]
    return _gguf(ref, name, files)


def _by_quant(ref: RepoRef, tag: str, files: set[str]) -> Selection | None:
    hits = [f for f in _models(files) if tag_matches(tag, quant_label(f))]
    if len(hits) > 1:
        raise HubError(
            f"{ref}: several files have quant {tag.upper()} ({', '.join(hits)}); "
            f"name one as {ref.repo_id}/FILE.gguf"
        )
    return _gguf(ref, hits[0], files) if hits else None


def _folder(ref: RepoRef, files: set[str]) -> Selection:
    top = sorted(f for f in files if "/" not in f)
    picked = tuple(f for f in top if any(fnmatch.fnmatch(f, p) for p in FOLDER_PATTERNS))
    if "config.json" not in picked or not any(f.endswith(".safetensors") for f in picked):
        have = ", ".join(sorted(files)[:12]) or "no files"
        raise HubError(f"{ref.repo_id} has no GGUF or safetensors model files (it has: {have})")
    return Selection("folder", picked, "")


def select_files(ref: RepoRef, files: Iterable[str]) -> Selection:
    """The files `ref` means among `files` (a repo listing); HubError says why none fit."""
    names = set(files)
    if ref.filename:
        return _by_file(ref, names)
    models = _models(names)
    if ref.quant:
        sel = _by_quant(ref, ref.quant, names)
        if sel is None:
            have = ", ".join(available_quants(names)) or "none: it has no GGUF files"
            raise HubError(f"{ref.repo_id} has no {ref.quant.upper()} GGUF file (quants: {have})")
        return sel
    if not models:
        return _folder(ref, names)
    default = _by_quant(ref, DEFAULT_QUANT, names)
    if default is not None:
        return default
    if len(models) == 1:
        return _gguf(ref, models[0], names)
    quants = available_quants(names)
    raise HubError(
        f"{ref.repo_id} has several GGUF quantizations ({', '.join(quants)}); "
        f"pick one, e.g. {ref.repo_id}:{quants[0]}"
    )
