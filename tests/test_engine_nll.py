"""Held-out NLL of the real pycode-22m files on the CPU path matches the stated figures."""

from __future__ import annotations

import json

import pytest

from localllm.config import EngineConfig
from localllm.engine.engine import LLMEngine
from localllm.scoring import mean_nll

# pycode-22m was trained on 512-token windows: the stated figures are the mean over
# non-overlapping 512-token chunks of the tokenized held-out text (BOS once, at the start)
WINDOW = 512


@pytest.mark.parametrize("quant", ["q8_0", "q4_k_m"])
def test_pycode_heldout_nll(testdata, quant):
    gold = json.loads((testdata / "golden" / f"pycode-22m-{quant}_greedy.json").read_text())
    text = json.loads((testdata / "golden" / "pycode-22m_greedy_f32.json").read_text())[
        "heldout_text"
    ]
    eng = LLMEngine(
        EngineConfig(
            model=str(testdata / "models" / f"pycode-22m-{quant}.gguf"),
            device="cpu",
            max_num_seqs=2,
        )
    )
    ids = eng.encode_prompt(text)
    nll = mean_nll(eng, ids, WINDOW)
    expected = float(gold["heldout_mean_nll"])
    assert abs(nll - expected) / expected < 0.005, (nll, expected)
