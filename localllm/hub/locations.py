"""Where each tool keeps its models, honouring the environment variables each tool reads."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Locations:
    hf_hub: Path  # the Hugging Face hub cache (models--owner--name/...)
    localllm: Path  # our own folder: models put there by hand (owner/repo/file.gguf)
    lm_studio: tuple[Path, ...]  # the current and the pre-0.3 LM Studio models folders
    llama_cpp: Path  # llama.cpp's `-hf` download cache
    ollama: Path  # Ollama's store: manifests/ and blobs/


def locations(env: Mapping[str, str] | None = None, home: Path | None = None) -> Locations:
    """The folders for this user; `env`/`home` default to the process's (tests pass their own)."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home

    def var(name: str, default: Path) -> Path:
        return Path(env[name]).expanduser() if env.get(name) else default

    cache = var("XDG_CACHE_HOME", home / ".cache")
    hf_home = var("HF_HOME", cache / "huggingface")
    return Locations(
        hf_hub=var("HF_HUB_CACHE", var("HUGGINGFACE_HUB_CACHE", hf_home / "hub")),
        localllm=var("LOCALLLM_MODELS", cache / "localllm" / "models"),
        lm_studio=(home / ".lmstudio" / "models", cache / "lm-studio" / "models"),
        llama_cpp=var("LLAMA_CACHE", cache / "llama.cpp"),
        ollama=var("OLLAMA_MODELS", home / ".ollama" / "models"),
    )


def manual_folder(repo_id: str, env: Mapping[str, str] | None = None) -> Path:
    """Where a user puts a repo's files by hand when there is no network."""
    return locations(env).localllm.joinpath(*repo_id.split("/"))
