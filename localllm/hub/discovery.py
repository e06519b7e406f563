"""Find the models a user already has on disk (pure logic, no UI).

Sources, in the order they are listed: explicit `--models-dir` folders, the localllm folder,
the Hugging Face hub cache, LM Studio, llama.cpp's download cache and Ollama's blob store
(resolved through its manifests). A file counts only if it starts with the GGUF magic; a
folder counts if it holds `config.json` and safetensors weights (Hugging Face layout).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from localllm.hub.locations import locations
from localllm.hub.names import is_first_part, is_gguf_name, is_projector, shard_names
from localllm.sources.hf_files import folder_size, is_hf_folder

GGUF_MAGIC = b"GGUF"
OLLAMA_MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"

Scanner = Callable[[Path], Iterator[tuple[Path, str]]]  # root -> (file or folder, name)


@dataclass(frozen=True)
class FoundModel:
    path: Path  # what to load: a .gguf file (for Ollama: the blob) or an HF folder
    name: str  # what `list` and the picker show; `--model NAME` accepts it
    source: str  # "models-dir" | "localllm" | "huggingface" | "lm-studio" | "llama.cpp" | "ollama"
    size: int  # bytes (all parts of a split GGUF; the safetensors files of a folder)

    @property
    def is_folder(self) -> bool:
        return self.path.is_dir()


def is_gguf(path: Path) -> bool:
    """True if `path` is a readable regular file that starts with the GGUF magic bytes."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _listable(path: Path) -> bool:
    """Skip helper files: vision projectors and the non-first parts of split models."""
    return not is_projector(path.name) and is_first_part(path.name)


def _walk(root: Path) -> Iterator[Path]:
    """Every *.gguf and every HF folder below root (symlinks followed, as in HF snapshots)."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        if "config.json" in filenames and is_hf_folder(here):
            yield here
        for fn in sorted(filenames):
            if is_gguf_name(fn):
                yield here / fn


def _scan_plain(root: Path) -> Iterator[tuple[Path, str]]:
    for p in _walk(root):
        yield p, str(p.relative_to(root)) if p != root else root.name


def _snapshots(repo: Path) -> list[Path]:
    """A repo's snapshots, the ones a ref (main, a tag) points at first, then newest first."""
    refs = repo / "refs"
    pinned = (
        [r.read_text().strip() for r in refs.rglob("*") if r.is_file()] if refs.is_dir() else []
    )
    snaps = [s for s in (repo / "snapshots").glob("*") if s.is_dir()]
    return sorted(snaps, key=lambda s: (s.name not in pinned, -s.stat().st_mtime, s.name))


def _scan_huggingface(root: Path) -> Iterator[tuple[Path, str]]:
    """<hub>/models--<org>--<name>/snapshots/<rev>/** -> "org/name/file.gguf" or "org/name"."""
    if not root.is_dir():
        return
    for repo in sorted(root.glob("models--*")):
        repo_name = repo.name[len("models--") :].replace("--", "/")
        for snap in _snapshots(repo):
            for p in _walk(snap):
                yield p, repo_name if p == snap else f"{repo_name}/{p.relative_to(snap)}"


def _scan_ollama(root: Path) -> Iterator[tuple[Path, str]]:
    """manifests/<registry>/<namespace>/<model>/<tag> (JSON) -> the model layer's blob."""
    manifests = root / "manifests"
    if not manifests.is_dir():
        return
    for manifest in sorted(p for p in manifests.rglob("*") if p.is_file()):
        parts = manifest.relative_to(manifests).parts  # (registry, ns, model, tag)
        if len(parts) < 3:
            continue
        try:
            layers = json.loads(manifest.read_text(encoding="utf-8")).get("layers", [])
        except (OSError, ValueError, AttributeError):
            continue
        for layer in layers:
            digest = layer.get("digest", "") if isinstance(layer, dict) else ""
            if layer.get("mediaType") != OLLAMA_MODEL_MEDIA_TYPE or ":" not in digest:
                continue
            blob = root / "blobs" / digest.replace(":", "-", 1)
            ns, model, tag = parts[-3], parts[-2], parts[-1]
            yield blob, f"{model}:{tag}" if ns == "library" else f"{ns}/{model}:{tag}"


def default_sources(
    models_dirs: Iterable[str | Path] = (),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[tuple[str, Path, Scanner]]:
    """(source name, folder, scanner) for every place to look, honouring the usual env vars."""
    loc = locations(env, home)
    out: list[tuple[str, Path, Scanner]] = [
        ("models-dir", Path(d).expanduser(), _scan_plain) for d in models_dirs
    ]
    out += [("localllm", loc.localllm, _scan_plain), ("huggingface", loc.hf_hub, _scan_huggingface)]
    out += [("lm-studio", d, _scan_plain) for d in loc.lm_studio]
    out += [("llama.cpp", loc.llama_cpp, _scan_plain), ("ollama", loc.ollama, _scan_ollama)]
    return out


def _size(path: Path) -> int:
    if path.is_dir():
        return folder_size(path)
    parts = [path.with_name(n) for n in shard_names(path.name)]
    return sum(p.stat().st_size for p in parts if p.exists())


def _valid(path: Path, real: Path) -> bool:
    if real.is_dir():
        return is_hf_folder(real)
    return _listable(path) and is_gguf(real)


def discover(
    models_dirs: Iterable[str | Path] = (),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[FoundModel]:
    """All models found, first source first, each real file or folder once, each name once."""
    seen: set[Path] = set()
    names: set[tuple[str, str]] = set()
    found: list[FoundModel] = []
    for source, root, scan in default_sources(models_dirs, env, home):
        for path, name in scan(root):
            try:
                real = path.resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if real in seen or (source, name) in names or not _valid(path, real):
                continue
            seen.add(real)
            names.add((source, name))
            found.append(FoundModel(path, name, source, _size(path)))
    return found


def format_size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


HOW_TO_GET_A_MODEL = """No models were found.

Get one from Hugging Face, for example:

    localllm pull Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M

then run `localllm chat` again, or:

    localllm chat --model Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M
    localllm chat --model path/to/model.gguf
    localllm chat --models-dir folder/with/gguf/files

Models downloaded by LM Studio, llama.cpp (-hf), Ollama or the Hugging Face CLI
(`hf download`) are found automatically, and so are files in ~/.cache/localllm/models."""


def find_by_name(name: str, found: list[FoundModel]) -> list[FoundModel]:
    """Models `name` designates: the exact `list` name (the first source wins), else the same
    name in any case, else every model whose file stem is `name` (`qwen2.5-0.5b-q4_k_m`)."""
    exact = [m for m in found if m.name == name]
    if exact:
        return exact[:1]
    folded = name.lower()
    same = [m for m in found if m.name.lower() == folded]
    if same:
        return same[:1]
    stem = folded.removesuffix(".gguf")
    return [m for m in found if m.name.lower().rsplit("/", 1)[-1].removesuffix(".gguf") == stem]
