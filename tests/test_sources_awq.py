"""AWQ folders: the fp16 folder of pycode-22m quantized by our AutoAWQ-order packer (group
128) loads through the model source; its weights are the round-to-nearest values exactly, its
held-out NLL is within 2% of the fp16 folder's; unsupported variants are refused."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from hf_build import build_hf_folder, quantize_folder
from safetensors.torch import load_file

from localllm.config import EngineConfig
from localllm.engine.engine import LLMEngine
from localllm.errors import ModelLoadError
from localllm.formats.awq import AWQTensor, unpack
from localllm.kernels.linear.qlinear import dequantize_weight, pack_weight
from localllm.scoring import mean_nll
from localllm.sources import open_model
from localllm.sources.hf_quant import quant_scheme

WINDOW = 512


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from conftest import testdata_path

    root = tmp_path_factory.mktemp("awq")
    fp16 = build_hf_folder(testdata_path("models", "pycode-22m-q8_0.gguf"), root / "fp16")
    return fp16, quantize_folder(fp16, root / "awq", group=128)


def test_awq_weights_are_the_round_to_nearest_values(folders):
    fp16, awq = folders
    src = open_model(awq)
    t = src.tensors.tensor("blk.2.ffn_down.weight")  # [512, 1536]: 12 groups per row
    assert isinstance(t, AWQTensor) and t.shape == (512, 1536) and t.group == 128
    got = dequantize_weight(pack_weight(t), torch.float16)  # [N, K]
    w = load_file(_shard_of(fp16, "model.layers.2.mlp.down_proj.weight"))[
        "model.layers.2.mlp.down_proj.weight"
    ].float()
    s = t.scales.float().t().repeat_interleave(128, dim=1)  # [N, K]
    z = unpack(t.qzeros).float().t().repeat_interleave(128, dim=1)
    q = (torch.round(w / s) + z).clamp(0, 15)  # round to nearest under the stored s, z
    assert torch.equal(got, ((q - z) * s).to(torch.float16))
    assert src.tensors.nbytes < 0.4 * open_model(fp16).tensors.nbytes


def _shard_of(folder, name: str):
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    return folder / index["weight_map"][name]


def test_awq_heldout_nll_within_2_percent_of_fp16(folders, testdata):
    text = json.loads((testdata / "golden" / "pycode-22m_greedy_f32.json").read_text())[
        "heldout_text"
    ]
    nll = {}
    for kind, folder in zip(("fp16", "awq"), folders):
        eng = LLMEngine(EngineConfig(model=str(folder), device="cpu", max_num_seqs=2))
        nll[kind] = mean_nll(eng, eng.encode_prompt(text)[: 4 * WINDOW], WINDOW)
    assert nll["fp16"] < nll["awq"] < 1.02 * nll["fp16"], nll


AWQ = {"quant_method": "awq", "version": "gemm", "bits": 4, "group_size": 128, "zero_point": True}


@pytest.mark.parametrize(
    "change,message",
    [
        ({"version": "gemv"}, "AWQ version 'gemv' is not supported"),
        ({"version": "exllama"}, "AWQ version 'exllama'"),
        ({"version": "marlin"}, "AWQ version 'marlin'"),
        ({"bits": 8}, "AWQ with 8 bits"),
        ({"group_size": 32}, "AWQ group size 32"),
        ({"zero_point": False}, "zero_point: false"),
        ({"quant_method": "gptq"}, "quantization 'gptq' is not supported"),
        ({"modules_to_not_convert": "lm_head"}, "modules_to_not_convert must be a list"),
    ],
)
def test_awq_variants_we_cannot_run_are_refused(change, message):
    with pytest.raises(ModelLoadError) as e:
        quant_scheme({"quantization_config": dict(AWQ, **change)}, "m")
    assert message in str(e.value)
    assert quant_scheme({"quantization_config": dict(AWQ, group_size=64)}, "m").group == 64  # type: ignore[union-attr]


def test_awq_tensors_without_config_or_with_bad_parts(folders, tmp_path):
    _, awq = folders
    copy = tmp_path / "m"
    shutil.copytree(awq, copy)
    cfg = json.loads((copy / "config.json").read_text())
    del cfg["quantization_config"]
    (copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(
        ModelLoadError, match="is quantized, but config.json has no quantization_config"
    ):
        open_model(copy)
    cfg["quantization_config"] = dict(AWQ, group_size=64)  # the file holds group-128 zeros
    (copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(
        ModelLoadError, match=r"down_proj.qzeros' has shape \[12, 64\], expected \[24, 64\]"
    ):
        open_model(copy)
