"""Reference parsing, quant labels and file selection (pure logic)."""

from __future__ import annotations

import pytest

from localllm.errors import HubError
from localllm.hub.names import quant_label, shard_names, tag_matches
from localllm.hub.refs import RepoRef, parse_repo_ref
from localllm.hub.select import select_files


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("Qwen/Qwen2.5-0.5B-Instruct-GGUF", RepoRef("Qwen/Qwen2.5-0.5B-Instruct-GGUF")),
        ("bartowski/Llama-3.2-1B-GGUF:q4_k_m", RepoRef("bartowski/Llama-3.2-1B-GGUF", "q4_k_m")),
        ("hf.co/unsloth/Qwen3-8B-GGUF:UD-Q4_K_XL", RepoRef("unsloth/Qwen3-8B-GGUF", "UD-Q4_K_XL")),
        ("https://huggingface.co/a/b", RepoRef("a/b")),
        ("hf.co/a/b:latest", RepoRef("a/b")),
        ("a/b/sub/x-Q8_0.gguf", RepoRef("a/b", None, "sub/x-Q8_0.gguf")),
        ("models/x.gguf", None),  # a path, not a repo
        ("./a/b", None),
        ("/abs/a/b", None),
        ("~/a/b", None),
        ("just-a-name", None),
        ("a/b/c", None),  # a file that is not .gguf
        ("../a/b", None),
        ("a/b:", None),
    ],
)
def test_parse(text, ref):
    assert parse_repo_ref(text) == ref


def test_ref_str():
    assert str(RepoRef("a/b", "Q8_0")) == "a/b:Q8_0"
    assert str(RepoRef("a/b", None, "f.gguf")) == "a/b/f.gguf"
    assert RepoRef("a/b").url == "https://huggingface.co/a/b"


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("qwen2.5-0.5b-instruct-q4_k_m.gguf", "Q4_K_M"),
        ("model.q8_0.gguf", "Q8_0"),
        ("Q4_K_M/model-Q4_K_M-00001-of-00002.gguf", "Q4_K_M"),
        ("Qwen3-8B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
        ("Llama-3-8B.IQ2_XXS.gguf", "IQ2_XXS"),
        ("Qwen3-8B-BF16.gguf", "BF16"),
        ("m-f16.gguf", "F16"),
        ("m-Q4_0_4_4.gguf", "Q4_0_4_4"),
        ("stories260K.gguf", None),
        ("Qwen2-7B.gguf", None),
    ],
)
def test_quant_label(name, label):
    assert quant_label(name) == label


def test_tags_and_shards():
    assert tag_matches("q4_k_xl", "UD-Q4_K_XL") and tag_matches("ud-q4_k_xl", "UD-Q4_K_XL")
    assert not tag_matches("Q4_K", "Q4_K_M") and not tag_matches("Q4_K_M", None)
    assert shard_names("d/m-00001-of-00003.gguf") == [
        "d/m-00001-of-00003.gguf",
        "d/m-00002-of-00003.gguf",
        "d/m-00003-of-00003.gguf",
    ]
    assert shard_names("m.gguf") == ["m.gguf"]


FILES = [
    "README.md",
    "m-Q8_0.gguf",
    "m-Q5_K_M.gguf",
    "mmproj-m-f16.gguf",
    "big/m-F16-00001-of-00002.gguf",
    "big/m-F16-00002-of-00002.gguf",
]


def test_select():
    sel = select_files(RepoRef("a/b", "f16"), FILES)
    assert sel.kind == "gguf" and sel.main == "big/m-F16-00001-of-00002.gguf"
    assert len(sel.files) == 2
    assert select_files(RepoRef("a/b", None, "M-q8_0.GGUF"), FILES).files == ("m-Q8_0.gguf",)
    with pytest.raises(HubError, match=r"several GGUF quantizations \(F16, Q5_K_M, Q8_0\)"):
        select_files(RepoRef("a/b"), FILES)
    assert select_files(RepoRef("a/b"), [*FILES, "m-Q4_K_M.gguf"]).main == "m-Q4_K_M.gguf"
    assert select_files(RepoRef("a/b"), ["only.gguf", "mmproj-x.gguf"]).main == "only.gguf"
    with pytest.raises(HubError, match=r"lacks big/m-F16-00002-of-00002.gguf"):
        select_files(RepoRef("a/b", "F16"), FILES[:5])
    with pytest.raises(
        HubError, match=r"several files have quant Q8_0 \(a-Q8_0.gguf, b-Q8_0.gguf\)"
    ):
        select_files(RepoRef("a/b", "q8_0"), ["a-Q8_0.gguf", "b-Q8_0.gguf"])


def test_select_folder():
    files = [
        "config.json",
        "model-1.safetensors",
        "model.safetensors.index.json",
        "x.bin",
        "tokenizer.model",
        "chat_template.jinja",
        "onnx/model.json",
        "README.md",
    ]
    sel = select_files(RepoRef("a/b"), files)
    assert sel.kind == "folder" and sel.main == ""
    assert sel.files == (
        "chat_template.jinja",
        "config.json",
        "model-1.safetensors",
        "model.safetensors.index.json",
        "tokenizer.model",
    )
    with pytest.raises(
        HubError, match=r"a/b has no GGUF or safetensors model files \(it has: README.md, x.bin\)"
    ):
        select_files(RepoRef("a/b"), ["README.md", "x.bin"])
    with pytest.raises(
        HubError, match=r"a/b has no Q8_0 GGUF file \(quants: none: it has no GGUF files\)"
    ):
        select_files(RepoRef("a/b", "Q8_0"), files)
