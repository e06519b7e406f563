"""`localllm pull`: download a model into the normal Hugging Face cache.

huggingface_hub does the transfer (progress bars, retries that resume with HTTP ranges, the
`models--owner--name/{blobs,snapshots,refs}` layout other tools read); we pick the files a
reference means, then check every newly downloaded file against the hash the Hub lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.file_download import repo_folder_name

from localllm.errors import HubError
from localllm.hub.failures import hub_errors
from localllm.hub.locations import locations
from localllm.hub.refs import RepoRef
from localllm.hub.remove import delete_cached_file
from localllm.hub.select import Selection, select_files
from localllm.hub.verify import check, expected_of


@dataclass(frozen=True)
class PullResult:
    ref: RepoRef
    path: Path  # the GGUF file to load (first part of a split one) or the model folder
    files: tuple[Path, ...]  # every file of the selection, in the cache
    downloaded: tuple[str, ...]  # repo paths fetched by this call (the rest were cached)

    @property
    def nbytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)


def _fetch(
    ref: RepoRef, sel: Selection, cache: Path, endpoint: str | None, token: str | None
) -> list[Path]:
    common: dict[str, Any] = dict(
        revision=ref.revision, cache_dir=cache, endpoint=endpoint, token=token
    )
    if sel.kind == "gguf":
        return [Path(hf_hub_download(ref.repo_id, f, **common)) for f in sel.files]
    root = Path(snapshot_download(ref.repo_id, allow_patterns=list(sel.files), **common))
    return [root / f for f in sel.files]


def _verify(ref: RepoRef, names: tuple[str, ...], paths: list[Path], siblings: dict) -> None:
    for name, path in zip(names, paths):
        expected = expected_of(siblings[name])
        if expected is None:
            continue
        try:
            check(path, expected, f"{ref.repo_id}/{name}")
        except HubError:
            delete_cached_file(path)
            raise


def pull(
    ref: RepoRef,
    *,
    cache_dir: Path | None = None,
    endpoint: str | None = None,
    token: str | None = None,
) -> PullResult:
    """Download what `ref` means (unless cached) and verify it; HubError says what failed."""
    cache = cache_dir if cache_dir is not None else locations().hf_hub
    with hub_errors(ref, endpoint):
        info = HfApi(endpoint=endpoint, token=token).model_info(
            ref.repo_id, revision=ref.revision, files_metadata=True
        )
        siblings = {s.rfilename: s for s in info.siblings or []}
        sel = select_files(ref, siblings)
        snapshot = cache / repo_folder_name(repo_id=ref.repo_id, repo_type="model")
        snapshot = snapshot / "snapshots" / str(info.sha)
        before = {f for f in sel.files if (snapshot / f).exists()}
        paths = _fetch(ref, sel, cache, endpoint, token)
    fresh = tuple(f for f, p in zip(sel.files, paths) if f not in before or p != snapshot / f)
    _verify(ref, fresh, [p for f, p in zip(sel.files, paths) if f in fresh], siblings)
    main = paths[sel.files.index(sel.main)] if sel.main else paths[0].parent
    return PullResult(ref, main, tuple(paths), fresh)
