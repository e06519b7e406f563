"""Check a downloaded file against the hash the Hub lists for it.

huggingface_hub checks only sizes; the Hub also publishes, per file, the sha256 of LFS files
(every weight file) and the git blob id (sha1 of "blob <size>\\0" + content) of small ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub.utils import tqdm

from localllm.errors import HubError

_CHUNK = 8 << 20
_BAR_FROM = 64 << 20  # show a progress bar when hashing files at least this large


@dataclass(frozen=True)
class Expected:
    algo: str  # "sha256" | "git-sha1"
    digest: str  # lower-case hex
    size: int | None


def expected_of(sibling: object) -> Expected | None:
    """The hash a `RepoSibling` (model_info with files_metadata) promises, if any."""
    lfs = getattr(sibling, "lfs", None)
    if lfs is not None:
        return Expected("sha256", str(lfs["sha256"]).lower(), int(lfs["size"]))
    blob = getattr(sibling, "blob_id", None)
    size = getattr(sibling, "size", None)
    return Expected("git-sha1", str(blob).lower(), size) if blob else None


def file_digest(path: Path, algo: str) -> str:
    size = path.stat().st_size
    h = hashlib.sha256() if algo == "sha256" else hashlib.sha1(b"blob %d\0" % size)
    with (
        open(path, "rb") as f,
        tqdm(
            total=size,
            unit="B",
            unit_scale=True,
            desc=f"verify {path.name}"[-40:],
            disable=size < _BAR_FROM or None,
        ) as bar,
    ):
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            bar.update(len(chunk))
    return h.hexdigest()


def check(path: Path, expected: Expected, what: str) -> None:
    """HubError when `path` is not the promised file (the caller removes it)."""
    size = path.stat().st_size
    if expected.size is not None and size != expected.size:
        raise HubError(f"{what}: downloaded {size} bytes, the Hub lists {expected.size}")
    got = file_digest(path, expected.algo)
    if got != expected.digest:
        raise HubError(
            f"{what}: {expected.algo} mismatch (got {got[:12]}…, the Hub lists "
            f"{expected.digest[:12]}…); the corrupt download was deleted, pull again"
        )
