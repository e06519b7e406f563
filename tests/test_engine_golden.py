"""The CPU reference path reproduces the golden greedy outputs of real models."""

from __future__ import annotations

import json

import pytest

from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine

GREEDY = SamplingParams(max_tokens=96, temperature=0.0, ignore_eos=True)


def _engine(path, **kw) -> LLMEngine:
    return LLMEngine(EngineConfig(model=str(path), device="cpu", **kw))


def test_stories260k_greedy_200_tokens(testdata):
    gold = json.loads((testdata / "golden" / "stories260K_greedy.json").read_text())
    eng = _engine(testdata / "models" / "stories260K.gguf", max_num_seqs=4)
    prompt = eng.encode_prompt("")
    assert prompt == gold["prompt_tokens"]
    n = len(gold["greedy_tokens"])
    [out] = eng.generate([prompt], SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
    assert out == gold["greedy_tokens"]


@pytest.mark.parametrize("quant", ["q8_0", "q4_k_m"])
def test_pycode_greedy_matches_golden(testdata, quant):
    gold = json.loads((testdata / "golden" / f"pycode-22m-{quant}_greedy.json").read_text())
    eng = _engine(testdata / "models" / f"pycode-22m-{quant}.gguf", max_num_seqs=4)
    prompts = [p["prompt_ids"] for p in gold["prompts"]]
    for p in gold["prompts"]:
        assert eng.encode_prompt(p["prompt"]) == p["prompt_ids"]
    outs = eng.generate(prompts, GREEDY)
    for p, out in zip(gold["prompts"], outs):
        assert out == p["greedy_ids"][: len(out)]
        assert len(out) == len(p["greedy_ids"])


def test_llama2_tiny_random_loads_and_runs(testdata):
    eng = _engine(testdata / "models" / "llama-2-tiny-random.gguf")
    assert eng.tokenizer.vocab_size == 32000
    [out] = eng.generate(
        [eng.encode_prompt("Hello world")],
        SamplingParams(max_tokens=8, temperature=0.7, seed=1, ignore_eos=True),
    )
    assert len(out) == 8 and all(0 <= t < 32000 for t in out)
