"""Hugging Face repo references as users type them (pure).

owner/repo                  the repo: its Q4_K_M GGUF, its only GGUF, or the whole folder
owner/repo:Q4_K_M           the GGUF file(s) with that quant label (case-insensitive)
owner/repo/path/FILE.gguf   that file
hf.co/owner/repo:Q8_0       the same, with the prefix Ollama and the Hub web pages use
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIXES = ("https://huggingface.co/", "http://huggingface.co/", "huggingface.co/", "hf.co/")
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO = re.compile(
    rf"^(?P<repo>{_PART}/{_PART})"
    r"(?::(?P<tag>[A-Za-z0-9._-]+)|/(?P<file>[^:\\]+\.gguf))?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class RepoRef:
    repo_id: str  # "owner/name"
    quant: str | None = None  # tag after ":" (any case)
    filename: str | None = None  # path inside the repo
    revision: str = "main"

    def __str__(self) -> str:
        if self.filename:
            return f"{self.repo_id}/{self.filename}"
        return f"{self.repo_id}:{self.quant}" if self.quant else self.repo_id

    @property
    def url(self) -> str:
        return f"https://huggingface.co/{self.repo_id}"


def parse_repo_ref(text: str) -> RepoRef | None:
    """The reference if `text` has the shape of one, else None (it may still be a path)."""
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    m = _REPO.match(text)
    if m is None or ".." in m.group("repo") or "//" in (m.group("file") or ""):
        return None
    if m.group("repo").lower().endswith(".gguf"):
        return None  # "folder/model.gguf" is a file path, never a repo
    tag = m.group("tag")
    if tag is not None and tag.lower() == "latest":  # Ollama's implicit tag: the default pick
        tag = None
    return RepoRef(m.group("repo"), tag, m.group("file"))
