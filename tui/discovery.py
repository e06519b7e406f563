"""Find GGUF model files the user already has on disk (pure logic, no UI).

Sources, in the order they are listed: explicit `--models-dir` folders, the localllm cache,
the Hugging Face hub cache, LM Studio, llama.cpp's download cache and Ollama's blob store
(resolved through its manifests). A candidate counts only if it starts with the GGUF magic.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

GGUF_MAGIC = b"GGUF"
OLLAMA_MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"


@dataclass(frozen=True)
class FoundModel:
    path: Path  # the file to load (for Ollama: the blob)
    name: str  # what the picker shows
    source: str  # "models-dir" | "localllm" | "huggingface" | "lm-studio" | "llama.cpp" | "ollama"
    size: int  # bytes


def is_gguf(path: Path) -> bool:
    """True if `path` is a readable regular file that starts with the GGUF magic bytes."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _is_listable(path: Path) -> bool:
    """Skip helper files: vision projectors and the non-first shards of split models."""
    name = path.name.lower()
    if name.startswith("mmproj"):
        return False
    stem = name[: -len(".gguf")] if name.endswith(".gguf") else name
    parts = stem.rsplit("-", 3)
    if len(parts) == 4 and parts[2] == "of" and parts[1].isdigit():
        return int(parts[1]) == 1
    return True


def _walk_gguf(root: Path) -> Iterator[Path]:
    """Every *.gguf below root (symlinks followed, as HF snapshots are symlinks), sorted."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fn in sorted(filenames):
            if fn.lower().endswith(".gguf"):
                yield Path(dirpath) / fn


def _plain_dir(source: str) -> Callable[[Path], Iterator[tuple[Path, str]]]:
    def scan(root: Path) -> Iterator[tuple[Path, str]]:
        for p in _walk_gguf(root):
            yield p, str(p.relative_to(root))

    scan.__name__ = f"scan_{source}"
    return scan


def _scan_huggingface(root: Path) -> Iterator[tuple[Path, str]]:
    """<hub>/models--<org>--<name>/snapshots/<rev>/**.gguf -> "org/name/file.gguf"."""
    if not root.is_dir():
        return
    for repo in sorted(root.glob("models--*")):
        repo_name = repo.name[len("models--") :].replace("--", "/")
        for snap in sorted((repo / "snapshots").glob("*")):
            for p in _walk_gguf(snap):
                yield p, f"{repo_name}/{p.relative_to(snap)}"


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
            name = f"{model}:{tag}" if ns == "library" else f"{ns}/{model}:{tag}"
            yield blob, name


def default_sources(
    models_dirs: Iterable[str | Path] = (),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[tuple[str, Path, Callable[[Path], Iterator[tuple[Path, str]]]]]:
    """(source name, folder, scanner) for every place to look, honouring the usual env vars."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home / ".cache"
    hf_home = Path(env["HF_HOME"]) if env.get("HF_HOME") else cache / "huggingface"
    hf_hub = Path(env["HF_HUB_CACHE"]) if env.get("HF_HUB_CACHE") else hf_home / "hub"
    llama_cache = Path(env["LLAMA_CACHE"]) if env.get("LLAMA_CACHE") else cache / "llama.cpp"
    ollama = Path(env["OLLAMA_MODELS"]) if env.get("OLLAMA_MODELS") else home / ".ollama" / "models"
    localllm = (
        Path(env["LOCALLLM_MODELS"])
        if env.get("LOCALLLM_MODELS")
        else cache / "localllm" / "models"
    )
    out = [("models-dir", Path(d).expanduser(), _plain_dir("models-dir")) for d in models_dirs]
    out += [
        ("localllm", localllm, _plain_dir("localllm")),
        ("huggingface", hf_hub, _scan_huggingface),
        ("lm-studio", home / ".lmstudio" / "models", _plain_dir("lm-studio")),
        ("lm-studio", cache / "lm-studio" / "models", _plain_dir("lm-studio")),
        ("llama.cpp", llama_cache, _plain_dir("llama.cpp")),
        ("ollama", ollama, _scan_ollama),
    ]
    return out


def discover(
    models_dirs: Iterable[str | Path] = (),
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> list[FoundModel]:
    """All GGUF models found, first source first, each real file once."""
    seen: set[Path] = set()
    found: list[FoundModel] = []
    for source, root, scan in default_sources(models_dirs, env, home):
        for path, name in scan(root):
            try:
                real = path.resolve(strict=True)
            except (OSError, RuntimeError):
                continue
            if real in seen or not _is_listable(path) or not is_gguf(real):
                continue
            seen.add(real)
            found.append(FoundModel(path, name, source, real.stat().st_size))
    return found


def format_size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


HOW_TO_GET_A_MODEL = """No GGUF model files were found.

Get one, for example from Hugging Face:

    huggingface-cli download Qwen/Qwen2.5-0.5B-Instruct-GGUF qwen2.5-0.5b-instruct-q4_k_m.gguf

then run `localllm chat` again (the Hugging Face cache is searched), or:

    localllm chat --model path/to/model.gguf
    localllm chat --models-dir folder/with/gguf/files

Models downloaded by LM Studio, llama.cpp (-hf) or Ollama are found automatically, and so are
files in ~/.cache/localllm/models."""
