"""`rm`: files pulled into the HF cache go through huggingface_hub's cache API; other tools'
models are refused with their own command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_hub import FakeHub
from huggingface_hub import scan_cache_dir, try_to_load_from_cache

from localllm.errors import HubError
from localllm.hub.discovery import discover
from localllm.hub.pull import pull
from localllm.hub.refs import parse_repo_ref
from localllm.hub.remove import plan_removal

REPO = "me/stories-GGUF"


@pytest.fixture
def pulled(tmp_path: Path, stories_path: Path):
    """Two quants of one repo pulled into a temp HF cache; (env, home, cache)."""
    data = stories_path.read_bytes()
    cache = tmp_path / "hub"
    with FakeHub() as hub:
        hub.add_repo(REPO, {"s-Q8_0.gguf": data, "s-F32.gguf": data[:-1] + b"!", "README.md": b"x"})
        for ref in (f"{REPO}:Q8_0", f"{REPO}:F32"):
            pull(parse_repo_ref(ref), cache_dir=cache, endpoint=hub.url)  # type: ignore[arg-type]
    env = {"HF_HUB_CACHE": str(cache), "LOCALLLM_MODELS": str(tmp_path / "mine")}
    return env, tmp_path / "home", cache


def test_rm_one_quant_then_the_repo(pulled, stories_path):
    env, home, cache = pulled
    plan = plan_removal(f"{REPO}:q8_0", env=env, home=home)
    assert [m.name for m in plan.models] == [f"{REPO}/s-Q8_0.gguf"]
    assert plan.nbytes == stories_path.stat().st_size
    plan.execute()
    assert try_to_load_from_cache(REPO, "s-Q8_0.gguf", cache_dir=cache) is None
    assert try_to_load_from_cache(REPO, "s-F32.gguf", cache_dir=cache) is not None
    assert [m.name for m in discover([], env=env, home=home)] == [f"{REPO}/s-F32.gguf"]
    # the last model of the repo: the whole repo goes (refs, snapshots, blobs)
    plan = plan_removal(f"{REPO}/s-F32.gguf", env=env, home=home)
    plan.execute()
    assert scan_cache_dir(cache).repos == frozenset()
    with pytest.raises(HubError, match=r"^me/stories-GGUF: no such model in `localllm list`$"):
        plan_removal(REPO, env=env, home=home)


def test_rm_whole_repo_by_id(pulled):
    env, home, cache = pulled
    plan = plan_removal(REPO, env=env, home=home)
    assert len(plan.models) == 2
    plan.execute()
    assert not (cache / "models--me--stories-GGUF").exists()


def test_rm_our_folder_and_refusals(tmp_path, stories_path):
    mine = tmp_path / "mine"
    (mine / "me" / "x").mkdir(parents=True)
    (mine / "me" / "x" / "x-Q8_0.gguf").write_bytes(stories_path.read_bytes())
    ollama = tmp_path / "ollama"
    (ollama / "blobs").mkdir(parents=True)
    (ollama / "blobs" / "sha256-a").write_bytes(stories_path.read_bytes())
    manifest = ollama / "manifests/registry.ollama.ai/library/tiny/latest"
    manifest.parent.mkdir(parents=True)
    layer = {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:a"}
    manifest.write_text(json.dumps({"layers": [layer]}))
    env = {"LOCALLLM_MODELS": str(mine), "OLLAMA_MODELS": str(ollama)}
    with pytest.raises(
        HubError, match=r"^tiny:latest belongs to Ollama: remove it with `ollama rm tiny:latest`$"
    ):
        plan_removal("tiny:latest", env=env, home=tmp_path)
    plan = plan_removal("me/x:Q8_0", env=env, home=tmp_path)
    assert plan.nbytes == stories_path.stat().st_size
    plan.execute()
    assert not (mine / "me").exists() and mine.exists()  # empty owner/repo folders go too
