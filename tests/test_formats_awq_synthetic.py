"""The synthetic AWQ writer: a tiny llama-shaped folder loads, runs with awq128 weights, and
`localllm bench`'s model resolution writes it once under the cache folder."""

from __future__ import annotations

import json

from localllm.bench import models
from localllm.config import EngineConfig
from localllm.core import SamplingParams
from localllm.engine.engine import LLMEngine
from localllm.formats import awq_synthetic
from localllm.formats.awq_synthetic import AwqSyntheticSpec, write_awq_synthetic

TINY = AwqSyntheticSpec(
    "tiny-awq", vocab=320, dim=128, n_layers=5, n_heads=4, n_kv_heads=2, ffn=256
)


def test_tiny_synthetic_awq_folder_runs(tmp_path):
    folder = write_awq_synthetic(TINY, tmp_path / "tiny-awq")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) == 3  # 4 + 1 layers, then the embeddings
    eng = LLMEngine(EngineConfig(model=str(folder), device="cpu", max_num_seqs=2))
    layer = eng.runner.model.w.layers[4]
    assert {w.fmt for w in [*layer.wqkv, layer.wo, *layer.w_gate_up, layer.w_down]} == {"awq128"}
    [out] = eng.generate(
        [eng.encode_prompt("hello")], SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
    )
    assert len(out) == 4 and eng.tokenizer.bos_id == 256


def test_bench_writes_the_awq_model_once(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALLLM_CACHE", str(tmp_path))
    monkeypatch.setitem(awq_synthetic.AWQ_SPECS, "tiny-awq", TINY)
    path = models.resolve_model("tiny-awq")
    assert path == str(tmp_path / "bench" / "tiny-awq")
    stamp = (tmp_path / "bench" / "tiny-awq" / "config.json").stat().st_mtime_ns
    assert models.resolve_model("tiny-awq") == path
    assert (tmp_path / "bench" / "tiny-awq" / "config.json").stat().st_mtime_ns == stamp
    assert "llama3-8b-awq" in awq_synthetic.AWQ_SPECS
