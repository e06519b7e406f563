"""Model discovery over temp folders laid out like each tool's cache."""

from __future__ import annotations

import json
from pathlib import Path

from localllm.tui.discovery import discover, format_size, is_gguf

GGUF = b"GGUF" + (3).to_bytes(4, "little") + bytes(56)


def gguf(path: Path, extra: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(GGUF + extra)
    return path


def names(found) -> list[tuple[str, str]]:
    return [(m.source, m.name) for m in found]


def test_models_dir_keeps_gguf_only(tmp_path):
    d = tmp_path / "models"
    gguf(d / "a.gguf")
    gguf(d / "nested" / "b.GGUF")
    (d / "fake.gguf").write_bytes(b"GGML" + bytes(60))  # wrong magic
    (d / "empty.gguf").write_bytes(b"")
    (d / "notes.txt").write_text("hello")
    gguf(d / "mmproj-model-f16.gguf")  # a vision projector, not a chat model
    gguf(d / "big-00001-of-00002.gguf")
    gguf(d / "big-00002-of-00002.gguf")
    found = discover([d], env={}, home=tmp_path / "home")
    assert names(found) == [
        ("models-dir", "a.gguf"),
        ("models-dir", "big-00001-of-00002.gguf"),
        ("models-dir", "nested/b.GGUF"),
    ]
    assert all(m.size == len(GGUF) for m in found)


def test_default_locations(tmp_path):
    home = tmp_path / "home"
    gguf(home / ".cache/localllm/models/mine.gguf")
    gguf(home / ".lmstudio/models/lmstudio-community/Qwen-GGUF/qwen.gguf")
    gguf(home / ".cache/lm-studio/models/old/x.gguf")
    gguf(home / ".cache/llama.cpp/bartowski_Llama-Q4_K_M.gguf")
    blob = gguf(home / ".cache/huggingface/hub/models--org--repo/blobs/abc123", b"hf")
    snap = home / ".cache/huggingface/hub/models--org--repo/snapshots/rev1"
    snap.mkdir(parents=True)
    (snap / "model-q4.gguf").symlink_to(blob)
    found = discover([], env={}, home=home)
    assert names(found) == [
        ("localllm", "mine.gguf"),
        ("huggingface", "org/repo/model-q4.gguf"),
        ("lm-studio", "lmstudio-community/Qwen-GGUF/qwen.gguf"),
        ("lm-studio", "old/x.gguf"),
        ("llama.cpp", "bartowski_Llama-Q4_K_M.gguf"),
    ]
    assert found[1].path == snap / "model-q4.gguf"


def test_env_overrides(tmp_path):
    hub, llama = tmp_path / "hub", tmp_path / "llama"
    gguf(hub / "models--a--b/snapshots/r/sub/m.gguf")
    gguf(llama / "l.gguf")
    gguf(tmp_path / "hfhome/hub/models--c--d/snapshots/r/n.gguf")
    env = {"HF_HUB_CACHE": str(hub), "LLAMA_CACHE": str(llama)}
    assert names(discover([], env=env, home=tmp_path / "h")) == [
        ("huggingface", "a/b/sub/m.gguf"),
        ("llama.cpp", "l.gguf"),
    ]
    env = {"HF_HOME": str(tmp_path / "hfhome")}
    assert names(discover([], env=env, home=tmp_path / "h")) == [("huggingface", "c/d/n.gguf")]


def _ollama_manifest(root: Path, ns: str, model: str, tag: str, digest: str | None) -> None:
    layers = [{"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:t"}]
    if digest:
        layers.append({"mediaType": "application/vnd.ollama.image.model", "digest": digest})
    path = root / "manifests/registry.ollama.ai" / ns / model / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))


def test_ollama_manifests_to_blobs(tmp_path):
    root = tmp_path / "ollama"
    gguf(root / "blobs/sha256-aaa")
    (root / "blobs/sha256-ttt").write_text("{{ .Prompt }}")
    (root / "blobs/sha256-bbb").write_bytes(b"\x00" * 64)  # not GGUF
    _ollama_manifest(root, "library", "llama3.2", "1b", "sha256:aaa")
    _ollama_manifest(root, "someone", "coder", "latest", "sha256:bbb")
    _ollama_manifest(root, "library", "nomodel", "x", None)
    _ollama_manifest(root, "library", "missing", "x", "sha256:zzz")
    (root / "manifests/registry.ollama.ai/library/broken").mkdir(parents=True)
    (root / "manifests/registry.ollama.ai/library/broken/1").write_text("{not json")
    found = discover([], env={"OLLAMA_MODELS": str(root)}, home=tmp_path / "h")
    assert names(found) == [("ollama", "llama3.2:1b")]
    assert found[0].path == root / "blobs/sha256-aaa"
    home_default = tmp_path / "h2"
    gguf(home_default / ".ollama/models/blobs/sha256-ccc")
    _ollama_manifest(home_default / ".ollama/models", "me", "m", "q4", "sha256:ccc")
    assert names(discover([], env={}, home=home_default)) == [("ollama", "me/m:q4")]


def test_same_file_listed_once(tmp_path):
    d = gguf(tmp_path / "models/a.gguf")
    (tmp_path / "home/.cache/localllm/models").mkdir(parents=True)
    (tmp_path / "home/.cache/localllm/models/link.gguf").symlink_to(d)
    found = discover([tmp_path / "models"], env={}, home=tmp_path / "home")
    assert names(found) == [("models-dir", "a.gguf")]


def test_helpers(tmp_path, stories_path):
    assert is_gguf(stories_path)
    assert not is_gguf(tmp_path / "missing.gguf")
    assert not is_gguf(tmp_path)
    assert format_size(512) == "512 B"
    assert format_size(1185376) == "1.1 MB"
    assert format_size(5 * (1 << 30)) == "5.0 GB"
