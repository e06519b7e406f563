"""Model discovery over temp folders laid out like each tool's cache, and `list` summaries."""

from __future__ import annotations

import json
from pathlib import Path

from localllm.hub.discovery import discover, find_by_name, format_size, is_gguf
from localllm.hub.summary import summarize

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
    assert [m.size for m in found] == [len(GGUF), 2 * len(GGUF), len(GGUF)]  # split: all parts


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


def _safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> Path:
    header, offset = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(offset))
    return path


LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "num_hidden_layers": 5,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def hf_folder(path: Path, config: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    _safetensors(path / "model.safetensors", {"w": ("BF16", [4, 8], 64)})
    return path


def test_hf_cache_folders_ggufs_and_refs_first(tmp_path, stories_path):
    hub = tmp_path / "hub"
    repo = hub / "models--org--gguf"
    blob = repo / "blobs" / "b1"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(stories_path.read_bytes())
    old, new = repo / "snapshots" / "old", repo / "snapshots" / "new"
    for snap in (old, new):
        snap.mkdir(parents=True)
        (snap / "m-Q8_0.gguf").symlink_to(blob)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("old")
    hf_folder(hub / "models--org--awq" / "snapshots" / "r1", LLAMA_CONFIG)
    (hub / "models--org--nosafetensors" / "snapshots" / "r").mkdir(parents=True)
    (hub / "models--org--nosafetensors" / "snapshots" / "r" / "config.json").write_text("{}")
    found = discover([], env={"HF_HUB_CACHE": str(hub)}, home=tmp_path / "h")
    assert names(found) == [("huggingface", "org/awq"), ("huggingface", "org/gguf/m-Q8_0.gguf")]
    weights = hub / "models--org--awq" / "snapshots" / "r1" / "model.safetensors"
    assert found[0].is_folder and found[0].size == weights.stat().st_size
    assert found[1].path == old / "m-Q8_0.gguf"  # the snapshot refs/main points at


def test_list_summaries_from_headers_and_configs(tmp_path, testdata):
    models = testdata / "models"
    home = tmp_path / "home"
    lm = home / ".lmstudio/models/lmstudio-community/pycode-GGUF"
    lm.mkdir(parents=True)
    (lm / "pycode-22m-q4_k_m.gguf").symlink_to(models / "pycode-22m-q4_k_m.gguf")
    ollama = tmp_path / "ollama"
    (ollama / "blobs").mkdir(parents=True)
    (ollama / "blobs/sha256-abc").symlink_to(models / "pycode-22m-q8_0.gguf")
    _ollama_manifest(ollama, "library", "pycode", "q8", "sha256:abc")
    awq = dict(LLAMA_CONFIG, quantization_config={"quant_method": "awq", "bits": 4})
    hf_folder(home / ".cache/localllm/models/org/awq", awq)
    broken = home / ".cache/localllm/models/broken.gguf"
    broken.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (9).to_bytes(8, "little"))
    found = discover([], env={"OLLAMA_MODELS": str(ollama)}, home=home)
    rows = {m.name: (m.source, summarize(m.path)) for m in found}
    assert set(rows) == {
        "broken.gguf",
        "org/awq",
        "lmstudio-community/pycode-GGUF/pycode-22m-q4_k_m.gguf",
        "pycode:q8",
    }
    src, s = rows["lmstudio-community/pycode-GGUF/pycode-22m-q4_k_m.gguf"]
    assert (src, s.arch, s.quant, s.context) == ("lm-studio", "llama", "Q4_K_M", 2048)
    src, s = rows["pycode:q8"]
    assert (src, s.arch, s.quant, s.context) == ("ollama", "llama", "Q8_0", 2048)
    src, s = rows["org/awq"]
    assert (src, s.arch, s.quant, s.context) == ("localllm", "LlamaForCausalLM", "AWQ-4bit", 4096)
    assert (
        rows["broken.gguf"][1].error
        == f"{broken}: truncated file: it ends inside the header (byte 24 needed, file has 16 bytes)"
    )
    assert {m.name: m.size for m in found}["pycode:q8"] == (
        models / "pycode-22m-q8_0.gguf"
    ).stat().st_size


def test_find_by_name(tmp_path):
    d = tmp_path / "m"
    gguf(d / "Qwen-Q4_K_M.gguf")
    gguf(d / "sub/Qwen-Q4_K_M.gguf")
    gguf(d / "other.gguf")
    found = discover([d], env={}, home=tmp_path / "h")
    assert [m.name for m in find_by_name("other.gguf", found)] == ["other.gguf"]
    assert [m.name for m in find_by_name("OTHER.GGUF", found)] == ["other.gguf"]
    assert [m.name for m in find_by_name("other", found)] == ["other.gguf"]
    assert len(find_by_name("qwen-q4_k_m", found)) == 2  # ambiguous: the caller says so
    assert find_by_name("nothing", found) == []
