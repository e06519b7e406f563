"""A `--model` reference -> a local path: what every command that loads a model calls.

In order: an existing path (a .gguf file, or a folder with config.json); a name that
`localllm list` shows; a Hub reference (`owner/repo[:QUANT]`, `owner/repo/FILE.gguf`)
already in the HF cache or in our models folder; otherwise that reference is pulled.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from localllm.errors import HubError, ModelLoadError
from localllm.hub.discovery import discover, find_by_name
from localllm.hub.locations import Locations, locations
from localllm.hub.refs import RepoRef, parse_repo_ref
from localllm.hub.select import Selection, select_files


def _local_path(path: Path) -> Path:
    if path.is_file() or (path / "config.json").is_file():
        return path
    if path.is_dir():
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        hint = f"; pass one of its files: {', '.join(ggufs[:5])}" if ggufs else ""
        raise ModelLoadError(str(path), f"is a folder without config.json{hint}")
    raise ModelLoadError(str(path), "not a regular file")


def _files_under(root: Path) -> list[str]:
    """Repo-relative paths of the files present below root (dangling links left out)."""
    out = []
    for dirpath, _, filenames in os.walk(root, followlinks=True):
        for fn in filenames:
            p = Path(dirpath) / fn
            if p.exists():
                out.append(p.relative_to(root).as_posix())
    return out


def _complete(root: Path, sel: Selection) -> bool:
    """A folder's safetensors index (if any) names only files that are present."""
    index = root / "model.safetensors.index.json"
    if sel.kind != "folder" or not index.is_file():
        return True
    try:
        shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    return all((root / s).is_file() for s in shards)


def _pick(ref: RepoRef, root: Path) -> Path | None:
    if not root.is_dir():
        return None
    try:
        sel = select_files(ref, _files_under(root))
    except HubError:
        return None  # not here (or ambiguous here): the Hub's full listing decides
    if not _complete(root, sel):
        return None
    return root / sel.main if sel.main else root


def _hf_snapshot(ref: RepoRef, loc: Locations) -> Path | None:
    """The cached snapshot of ref.revision (refs/<revision>), else the newest one."""
    repo = loc.hf_hub / ("models--" + ref.repo_id.replace("/", "--"))
    pinned = repo / "refs" / ref.revision
    if pinned.is_file():
        return repo / "snapshots" / pinned.read_text().strip()
    snaps = [s for s in (repo / "snapshots").glob("*") if s.is_dir()]
    return max(snaps, key=lambda s: s.stat().st_mtime) if snaps else None


def find_local(ref: RepoRef, loc: Locations) -> Path | None:
    """ref in the HF cache or in our models folder (put there by hand), without network."""
    snapshot = _hf_snapshot(ref, loc)
    for root in (snapshot, loc.localllm.joinpath(*ref.repo_id.split("/"))):
        hit = _pick(ref, root) if root is not None else None
        if hit is not None:
            return hit
    return None


def resolve_model(
    ref: str,
    *,
    download: bool = True,
    models_dirs: Iterable[str | Path] = (),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    endpoint: str | None = None,
) -> Path:
    """The local path `ref` designates, pulling a Hub reference that is not here yet."""
    path = Path(ref).expanduser()
    if path.exists():
        return _local_path(path)
    hits = find_by_name(ref, discover(models_dirs, env, home))
    if len(hits) == 1:
        return hits[0].path
    if hits:
        names = ", ".join(f"{m.name} ({m.source})" for m in hits[:6])
        raise HubError(f"{ref}: several models have that name: {names}")
    repo = parse_repo_ref(ref)
    if repo is None:
        raise ModelLoadError(ref, "no such file, and no model of that name in `localllm list`")
    loc = locations(env, home)
    local = find_local(repo, loc)
    if local is not None:
        return local
    if not download:
        raise HubError(f"{repo} is not on this machine; `localllm pull {repo}` downloads it")
    from localllm.hub.pull import pull  # huggingface_hub's network stack only when needed

    return pull(repo, cache_dir=loc.hf_hub, endpoint=endpoint).path
