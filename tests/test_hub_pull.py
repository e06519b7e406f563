"""`pull` and Hub references against a fake Hub on loopback (fake_hub.py): cache layout,
quant-tag selection, resume after a dropped connection, hash checks, one-line errors."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import pytest
from fake_hub import FakeHub
from huggingface_hub import constants, try_to_load_from_cache

from localllm.errors import HubError, ModelLoadError
from localllm.hub.pull import pull
from localllm.hub.refs import parse_repo_ref
from localllm.hub.resolve import resolve_model

REPO = "me/stories-GGUF"


@pytest.fixture
def stories(stories_path: Path) -> bytes:
    return stories_path.read_bytes()


@pytest.fixture
def hub(stories: bytes):
    with FakeHub() as h:
        h.add_repo(
            REPO,
            {"stories-Q8_0.gguf": stories, "stories-F32.gguf": stories[:4096], "README.md": b"hi"},
        )
        yield h


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "hub"


def _pull(hub: FakeHub, cache: Path, ref: str):
    parsed = parse_repo_ref(ref)
    assert parsed is not None, ref
    return pull(parsed, cache_dir=cache, endpoint=hub.url)


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_quant_tag_picks_file_into_the_hf_cache(hub, cache, stories):
    r = _pull(hub, cache, f"{REPO}:q8_0")  # tags match in any case
    assert r.path.name == "stories-Q8_0.gguf" and r.path.read_bytes() == stories
    assert r.downloaded == ("stories-Q8_0.gguf",) and r.nbytes == len(stories)
    # the normal HF layout: other tools (and huggingface_hub itself) find the file
    assert try_to_load_from_cache(REPO, "stories-Q8_0.gguf", cache_dir=cache) == str(r.path)
    repo_dir = cache / "models--me--stories-GGUF"
    assert (repo_dir / "refs" / "main").read_text() == hub.repos[REPO].commit
    assert r.path.resolve().name == hashlib.sha256(stories).hexdigest()
    # pulled again: nothing is fetched
    n = len(hub.gets("stories-Q8_0.gguf"))
    again = _pull(hub, cache, f"{REPO}:Q8_0")
    assert again.downloaded == () and again.path == r.path
    assert len(hub.gets("stories-Q8_0.gguf")) == n


def test_dropped_connection_resumes_with_a_range(hub, cache, stories, monkeypatch):
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 64 << 10)
    hub.cut_once.add(f"{REPO}/stories-Q8_0.gguf")
    r = _pull(hub, cache, f"{REPO}:Q8_0")
    ranges = hub.gets("stories-Q8_0.gguf")
    assert ranges[0] is None and len(ranges) == 2
    resumed_at = int(ranges[1].removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= len(stories) // 2 and resumed_at % (64 << 10) == 0
    assert r.path.read_bytes() == stories


def test_hash_mismatch_is_rejected_and_deleted(hub, cache, stories):
    bad = bytearray(stories)
    bad[len(bad) // 2] ^= 0xFF  # same size, one byte flipped
    hub.repos[REPO].served["stories-Q8_0.gguf"] = bytes(bad)
    with pytest.raises(HubError, match=r"stories-Q8_0.gguf: sha256 mismatch .* pull again"):
        _pull(hub, cache, f"{REPO}:Q8_0")
    assert try_to_load_from_cache(REPO, "stories-Q8_0.gguf", cache_dir=cache) is None
    assert not list((cache / "models--me--stories-GGUF" / "blobs").iterdir())
    del hub.repos[REPO].served["stories-Q8_0.gguf"]
    assert _pull(hub, cache, f"{REPO}:Q8_0").path.read_bytes() == stories


def test_small_files_are_checked_by_git_blob_id(hub, cache):
    hub.add_repo("me/tiny", {"config.json": b"{}", "model.safetensors": b"\0" * 16})
    hub.repos["me/tiny"].served["config.json"] = b"[]"
    with pytest.raises(HubError, match=r"me/tiny/config.json: git-sha1 mismatch"):
        _pull(hub, cache, "me/tiny")


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (f"{REPO}/nope.gguf", "me/stories-GGUF has no file nope.gguf (its GGUF files: "),
        (f"{REPO}:Q5_K_M", "me/stories-GGUF has no Q5_K_M GGUF file (quants: F32, Q8_0)"),
        (REPO, "several GGUF quantizations (F32, Q8_0); pick one, e.g. me/stories-GGUF:F32"),
        ("me/missing", "me/missing: no such model repository on http://127.0.0.1:"),
    ],
)
def test_clear_errors(hub, cache, ref, message):
    with pytest.raises(HubError) as e:
        _pull(hub, cache, ref)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_no_network_says_where_to_put_the_file(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALLLM_MODELS", str(tmp_path / "mine"))
    ref = parse_repo_ref(f"{REPO}:Q8_0")
    with pytest.raises(HubError) as e:
        pull(ref, cache_dir=cache, endpoint=_closed_port())
    text = str(e.value)
    assert text.startswith("cannot reach the Hugging Face Hub at http://127.0.0.1:")
    assert f"into {tmp_path}/mine/me/stories-GGUF/ (keep its name, which contains Q8_0)" in text
    ref = parse_repo_ref(f"{REPO}/sub/x.gguf")
    with pytest.raises(HubError, match=r"download x.gguf from .* \(keep that name\)"):
        pull(ref, cache_dir=cache, endpoint=_closed_port())


def test_default_pick_takes_every_part_of_a_split_q4_k_m(hub, cache, stories):
    half = len(stories) // 2
    files = {
        "Q4_K_M/m-Q4_K_M-00001-of-00002.gguf": stories[:half],
        "Q4_K_M/m-Q4_K_M-00002-of-00002.gguf": stories[half:],
        "m-Q8_0.gguf": stories,
        "mmproj-m-f16.gguf": b"GGUF",
    }
    hub.add_repo("me/split", files)
    r = _pull(hub, cache, "me/split")
    assert r.path.name == "m-Q4_K_M-00001-of-00002.gguf"
    assert [p.name for p in r.files] == [
        "m-Q4_K_M-00001-of-00002.gguf",
        "m-Q4_K_M-00002-of-00002.gguf",
    ]
    assert b"".join(p.read_bytes() for p in r.files) == stories
    assert hub.gets("m-Q8_0.gguf") == [] and hub.gets("mmproj-m-f16.gguf") == []


def test_folder_repo_downloads_config_tokenizer_and_safetensors_only(hub, cache):
    header = json.dumps({"w": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
    files = {
        "config.json": b'{"architectures": ["LlamaForCausalLM"]}',
        "tokenizer.json": b"{}",
        "model.safetensors": len(header).to_bytes(8, "little") + header + bytes(8),
        "pytorch_model.bin": b"\0" * 64,
        "onnx/model.onnx": b"\0",
    }
    hub.add_repo("me/folder", files)
    r = _pull(hub, cache, "me/folder")
    assert r.path.is_dir() and r.path.name == hub.repos["me/folder"].commit
    assert sorted(p.name for p in r.path.iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ]
    assert hub.gets("pytorch_model.bin") == []


def test_resolve_pulls_once_then_works_offline(hub, cache, tmp_path, stories):
    env = {"HF_HUB_CACHE": str(cache), "LOCALLLM_MODELS": str(tmp_path / "mine")}
    home = tmp_path / "home"
    path = resolve_model(f"hf.co/{REPO}:Q8_0", env=env, home=home, endpoint=hub.url)
    assert path.read_bytes() == stories
    n = len(hub.requests)
    offline = _closed_port()
    # the cached file answers the same reference, a list name and a unique file stem
    for ref in (f"{REPO}:Q8_0", f"{REPO}/stories-Q8_0.gguf", "stories-Q8_0"):
        assert resolve_model(ref, env=env, home=home, endpoint=offline) == path
    assert len(hub.requests) == n
    with pytest.raises(HubError, match=r"not on this machine; `localllm pull me/x:Q4_K_M`"):
        resolve_model("me/x:Q4_K_M", env=env, home=home, download=False)


def test_resolve_finds_files_put_by_hand(tmp_path, stories_path):
    mine = tmp_path / "mine" / "me" / "stories-GGUF"
    mine.mkdir(parents=True)
    (mine / "stories-Q8_0.gguf").symlink_to(stories_path)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "LOCALLLM_MODELS": str(tmp_path / "mine")}
    got = resolve_model(f"{REPO}:q8_0", env=env, home=tmp_path, endpoint=_closed_port())
    assert got == mine / "stories-Q8_0.gguf"


def test_resolve_paths_and_bad_references(tmp_path, stories_path):
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    assert resolve_model(str(stories_path), env=env, home=tmp_path) == stories_path
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert resolve_model(str(folder), env=env, home=tmp_path) == folder
    (tmp_path / "ggufs").mkdir()
    (tmp_path / "ggufs" / "a.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelLoadError, match=r"ggufs: is a folder without config.json; pass"):
        resolve_model(str(tmp_path / "ggufs"), env=env, home=tmp_path)
    with pytest.raises(ModelLoadError, match=r"models/x.gguf: no such file"):
        resolve_model("models/x.gguf", env=env, home=tmp_path)
