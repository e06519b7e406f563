"""`localllm rm`: delete pulled models from the HF cache (through huggingface_hub's cache
API) or from our models folder. Other tools' models are left to those tools.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import scan_cache_dir
from huggingface_hub.utils import CachedFileInfo, CachedRepoInfo, HFCacheInfo

from localllm.errors import HubError
from localllm.hub.discovery import FoundModel, discover, find_by_name
from localllm.hub.locations import locations
from localllm.hub.names import quant_label, shard_names, tag_matches
from localllm.hub.refs import RepoRef, parse_repo_ref

# what to tell a user who asks us to delete another tool's model
_NOT_OURS: dict[str, Callable[[FoundModel], str]] = {
    "ollama": lambda m: f"{m.name} belongs to Ollama: remove it with `ollama rm {m.name}`",
    "lm-studio": lambda m: f"{m.name} belongs to LM Studio: delete it there (file: {m.path})",
    "llama.cpp": lambda m: f"{m.name} is in llama.cpp's cache: delete {m.path} yourself",
    "models-dir": lambda m: f"{m.name} is in a folder you named: delete {m.path} yourself",
}


@dataclass
class RemovalPlan:
    models: list[FoundModel]
    nbytes: int = 0  # what deleting frees
    _steps: list[Callable[[], None]] = field(default_factory=list)

    def execute(self) -> None:
        for step in self._steps:
            step()


def delete_cached_file(path: Path) -> None:
    """Remove one file of an HF snapshot and its blob (a corrupt download)."""
    blob = path.resolve()
    path.unlink(missing_ok=True)
    if blob != path:
        blob.unlink(missing_ok=True)


def _norm(p: Path) -> Path:
    """The path with its folders resolved but not the entry itself (snapshot files are links)."""
    return p.parent.resolve() / p.name


def _matches(ref: RepoRef, m: FoundModel) -> bool:
    if m.source not in ("huggingface", "localllm"):
        return False
    if m.name == ref.repo_id:  # a folder model
        return not (ref.quant or ref.filename)
    if not m.name.startswith(ref.repo_id + "/"):
        return False
    if ref.filename:
        return m.name == f"{ref.repo_id}/{ref.filename}"
    return ref.quant is None or tag_matches(ref.quant, quant_label(m.name))


def select_models(target: str, found: list[FoundModel]) -> list[FoundModel]:
    """The models `target` (a list name, a repo reference or a path) designates."""
    hits = find_by_name(target, found)
    if hits:
        return hits
    ref = parse_repo_ref(target)
    if ref is not None:
        return [m for m in found if _matches(ref, m)]
    path = Path(target).expanduser()
    real = path.resolve() if path.exists() else None
    return [m for m in found if real is not None and m.path.resolve() == real]


def _hf_files(repo: CachedRepoInfo, m: FoundModel) -> list[CachedFileInfo]:
    """The cache entries of a found model: every part of a GGUF, every file of a folder."""
    if m.path.is_dir():
        return [f for r in repo.revisions if r.snapshot_path == _norm(m.path) for f in r.files]
    parts = {_norm(m.path.with_name(n)) for n in shard_names(m.path.name)}
    return [f for r in repo.revisions for f in r.files if _norm(f.file_path) in parts]


def _plan_hf(
    cache: HFCacheInfo, models: list[FoundModel], everything: list[FoundModel]
) -> RemovalPlan:
    plan = RemovalPlan(models)
    for repo in cache.repos:
        inside = [m for m in everything if repo.repo_path in _norm(m.path).parents]
        mine = [m for m in inside if m in models]
        if not mine:
            continue
        rest = [m for m in inside if m not in mine]
        if rest:  # other models of this repo stay: delete only these files
            strategy = cache.delete_files(*[f for m in mine for f in _hf_files(repo, m)])
        else:  # nothing of the repo stays: remove it whole (refs and snapshots too)
            strategy = cache.delete_revisions(*[r.commit_hash for r in repo.revisions])
        plan.nbytes += strategy.expected_freed_size
        plan._steps.append(strategy.execute)
    return plan


def _delete_local(m: FoundModel, root: Path) -> None:
    if m.path.is_dir():
        shutil.rmtree(m.path)
    else:
        for n in shard_names(m.path.name):
            m.path.with_name(n).unlink(missing_ok=True)
    parent = m.path.parent
    while parent != root and root in parent.parents and not any(parent.iterdir()):
        parent.rmdir()  # drop the owner/repo folders left empty
        parent = parent.parent


def plan_removal(
    target: str,
    *,
    models_dirs: Iterable[str | Path] = (),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> RemovalPlan:
    """What `rm target` deletes; HubError when it designates nothing we may delete."""
    found = discover(models_dirs, env, home)
    models = select_models(target, found)
    if not models:
        raise HubError(f"{target}: no such model in `localllm list`")
    foreign = [m for m in models if m.source in _NOT_OURS]
    if foreign:
        raise HubError(_NOT_OURS[foreign[0].source](foreign[0]))
    loc = locations(env, home)
    hf = [m for m in models if m.source == "huggingface"]
    plan = _plan_hf(scan_cache_dir(loc.hf_hub), hf, found) if hf else RemovalPlan([])
    for m in models:
        if m.source == "localllm":
            plan.models.append(m)
            plan.nbytes += m.size
            plan._steps.append(functools.partial(_delete_local, m, loc.localllm))
    return plan
