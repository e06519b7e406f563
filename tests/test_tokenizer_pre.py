"""BPE pre-tokenizers: every preset splits like HF `tokenizers`; unknown types are refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from gguf_edit import V, rewrite
from tokenizers import Regex
from tokenizers import pre_tokenizers as hf_pre

from localllm.cli import main
from localllm.errors import LocalLLMError, ModelLoadError
from localllm.formats.gguf import GGUFFile
from localllm.tokenizer import Tokenizer
from localllm.tokenizer.pre import PRE_TOKENIZERS, PreTokenizer, pre_tokenizer

EXTRA_TEXTS = [
    "HelloWorld camelCase ÉcoleNormale XMLHttpRequest 12345 x/y\n/z",
    "東京タワー 123 ナ 中文 한국어",
    "Hello, world! 3.14…。，、 done",
    "  \n\n  tail  \r\n",
    "ώ ΐ Ωmega Kelvin ι ﬀ",
    "<sentinel:12> IMGIMGABZ \t\tx",
]


def _texts(testdata: Path) -> list[str]:
    texts = list(EXTRA_TEXTS)
    for f in sorted((testdata / "vocab").glob("*.inp")):
        texts += f.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    return texts


def _hf(pre: PreTokenizer) -> hf_pre.PreTokenizer:
    """The same preset as HF `Split` pre-tokenizers (Oniguruma; `$` is its end of input)."""
    return hf_pre.Sequence(
        [hf_pre.Split(Regex(p.replace(r"\Z", "$")), "isolated") for p in pre.patterns]
    )


def _distinct() -> dict[str, PreTokenizer]:
    out: dict[str, PreTokenizer] = {}
    for name, pre in PRE_TOKENIZERS.items():
        if pre.patterns not in {p.patterns for p in out.values()}:
            out[name] = pre
    return out


@pytest.mark.parametrize("name", list(_distinct()))
def test_preset_splits_like_hf_tokenizers(testdata: Path, name: str) -> None:
    ours, ref = PRE_TOKENIZERS[name], _hf(PRE_TOKENIZERS[name])
    for text in _texts(testdata):
        assert ours.split(text) == [w for w, _ in ref.pre_tokenize_str(text)], (name, text)


def test_common_models_are_registered() -> None:
    for name in (
        "deepseek-coder",
        "deepseek-llm",
        "deepseek-v3",
        "tekken",
        "chatglm-bpe",
        "viking",
        "bloom",
        "poro-chat",
        "jina-v1-en",
        "jina-v2-code",
        "jina-es",
        "jina-de",
        "llama-bpe",
        "qwen2",
        "smollm",
    ):
        assert name in PRE_TOKENIZERS
    assert pre_tokenizer("tekken").split("HelloWorld 42") == ["Hello", "World", " ", "4", "2"]
    assert pre_tokenizer("deepseek-v3").split("12345") == ["123", "45"]
    assert pre_tokenizer("bloom").split("Hi, you!") == ["Hi", ",", " you", "!"]


def test_unknown_pre_tokenizer_is_refused() -> None:
    with pytest.raises(LocalLLMError, match="unknown pre-tokenizer type .*'nonesuch'"):
        pre_tokenizer("nonesuch")


def test_chatglm_has_no_default_bos(testdata: Path) -> None:
    meta = dict(GGUFFile(testdata / "vocab" / "ggml-vocab-gpt-2.gguf").metadata)
    meta = {k: v for k, v in meta.items() if not k.endswith("bos_token_id")}
    assert Tokenizer.from_gguf({**meta, "tokenizer.ggml.pre": "gpt-2"}).bos_id == 11
    assert Tokenizer.from_gguf({**meta, "tokenizer.ggml.pre": "chatglm-bpe"}).bos_id is None


@pytest.fixture(scope="module")
def bad_tokenizers(tmp_path_factory) -> dict[str, Path]:
    from conftest import testdata_path

    src = testdata_path("models", "stories260K.gguf")
    d = tmp_path_factory.mktemp("tok")
    gpt2 = {
        "tokenizer.ggml.model": ("gpt2", V.STRING, None),
        "tokenizer.ggml.merges": (["a b"], V.ARRAY, V.STRING),
    }
    return {
        "pre": rewrite(
            src,
            d / "pre.gguf",
            kv={**gpt2, "tokenizer.ggml.pre": ("nonesuch-coder", V.STRING, None)},
        ),
        "bert": rewrite(
            src, d / "bert.gguf", kv={"tokenizer.ggml.model": ("bert", V.STRING, None)}
        ),
    }


CASES = {
    "pre": "unknown pre-tokenizer type tokenizer.ggml.pre 'nonesuch-coder'",
    "bert": "unsupported tokenizer.ggml.model 'bert'",
}


@pytest.mark.parametrize("case", list(CASES))
def test_cli_refuses_unsupported_tokenizer(case: str, bad_tokenizers, capsys) -> None:
    path = bad_tokenizers[case]
    code = main(["generate", "--model", str(path), "--prompt", "x", "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert str(path) in err and CASES[case] in err and "Traceback" not in err
    with pytest.raises(ModelLoadError, match=CASES[case]) as e:
        Tokenizer.from_gguf_file(GGUFFile(path))
    assert e.value.path == str(path)


def test_cli_process_refuses_unknown_pre_once(bad_tokenizers) -> None:
    path = bad_tokenizers["pre"]
    r = subprocess.run(
        [sys.executable, "-m", "localllm.cli", "generate", "--model", str(path), "-p", "x"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and CASES["pre"] in lines[0], r.stderr
