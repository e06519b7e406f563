"""`info` figures on real files, checked against what the gguf library reads from them."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from gguf import GGUFReader

from localllm.config import DEFAULT_BLOCK_SIZE
from localllm.errors import LocalLLMError
from localllm.hub.info import metadata_lines, model_report
from localllm.hub.memory import GpuRoom, current_gpu


def _independent(path):
    """Tensor types, counts, bytes and element counts as the gguf package reads them."""
    r = GGUFReader(path)
    count, size = Counter(), Counter()
    for t in r.tensors:
        count[t.tensor_type.name] += 1
        size[t.tensor_type.name] += int(t.n_bytes)
    params = sum(int(math.prod(int(d) for d in t.shape)) for t in r.tensors)
    return count, size, params


@pytest.mark.parametrize(
    ("name", "layers", "kv_heads", "head_dim"),
    [("stories260K.gguf", 5, 4, 8), ("pycode-22m-q4_k_m.gguf", 6, 2, 64)],
)
def test_info_numbers_match_the_file(testdata, name, layers, kv_heads, head_dim):
    path = testdata / "models" / name
    report = model_report(path, context=1000)
    count, size, params = _independent(path)
    assert {t.name: t.count for t in report.tensor_types} == dict(count)
    assert {t.name: t.nbytes for t in report.tensor_types} == dict(size)
    assert report.weight_bytes == sum(size.values()) and report.params == params
    assert report.file_bytes == path.stat().st_size and report.format == "GGUF v3"
    assert report.arch == "llama" and report.trained_context == 2048 and report.context == 1000
    kv = {k.dtype: k for k in report.kv}
    bs = report.block_size
    assert bs == DEFAULT_BLOCK_SIZE
    blocks = -(-1000 // bs)  # the pool allocates whole blocks
    fp16 = layers * 2 * kv_heads * head_dim * 2  # K and V, 2 bytes each, per token
    int8 = layers * 2 * kv_heads * (head_dim + 4)  # 1 byte each + an fp32 scale per head
    assert kv["fp16"].bytes_per_token == fp16 and kv["fp16"].nbytes == blocks * bs * fp16
    assert kv["int8"].nbytes == kv["fp8"].nbytes == blocks * bs * int8
    big = model_report(path, context=1000, block_size=64)  # the caller's block size
    assert big.block_size == 64 and big.kv[0].nbytes == -(-1000 // 64) * 64 * fp16


def test_info_quant_and_default_context(testdata):
    report = model_report(testdata / "models" / "pycode-22m-q4_k_m.gguf")
    assert report.quant == "Q4_K_M" and report.context == 2048
    assert [t.name for t in report.tensor_types] == ["Q4_K", "Q6_K", "F32"]  # by bytes
    assert report.params == 22_288_896
    lines = dict(metadata_lines(report.metadata))
    assert lines["tokenizer.ggml.tokens"] == "[4096 items]"
    assert lines["llama.block_count"] == "6" and lines["general.file_type"] == "15"
    with pytest.raises(LocalLLMError, match="--ctx must be >= 1"):
        model_report(testdata / "models" / "stories260K.gguf", context=0)


def test_gpu_fit_arithmetic(stories_path):
    gib = 1 << 30
    # 24 GiB card, 2 GiB held by other programs, 0.9 utilization: 21.6 - 2 = 19.6 GiB usable
    room = GpuRoom("RTX 4090", free=22 * gib, total=24 * gib, utilization=0.9)
    assert room.usable == int(24 * gib * 0.9) - 2 * gib
    report = model_report(stories_path, gpu=room)
    fp16 = report.kv[0]
    assert room.fits(report.weight_bytes + fp16.nbytes)
    bs = report.block_size
    tokens = room.max_context(report.weight_bytes, fp16, bs)
    assert tokens % bs == 0
    assert (tokens + bs) * fp16.bytes_per_token > room.usable - report.weight_bytes
    assert tokens * fp16.bytes_per_token <= room.usable - report.weight_bytes
    small = GpuRoom("tiny", free=1 << 20, total=1 << 30, utilization=0.9)
    assert (
        not small.fits(report.weight_bytes)
        and small.max_context(report.weight_bytes, fp16, 16) == 0
    )


def test_no_gpu_here():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert current_gpu(0.9) is None


def test_info_on_a_hugging_face_folder(tmp_path):
    import json

    cfg = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 3,
        "intermediate_size": 128,
        "vocab_size": 256,
        "max_position_embeddings": 512,
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128},
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    header = {
        "a.qweight": {"dtype": "I32", "shape": [64, 8], "data_offsets": [0, 2048]},
        "a.scales": {"dtype": "F16", "shape": [1, 64], "data_offsets": [2048, 2176]},
        "norm": {"dtype": "F16", "shape": [64], "data_offsets": [2176, 2304]},
    }
    raw = json.dumps(header).encode()
    st = tmp_path / "model.safetensors"
    st.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(2304))
    report = model_report(tmp_path)
    assert (report.format, report.arch, report.quant) == (
        "Hugging Face folder",
        "Qwen2ForCausalLM",
        "AWQ-4bit",
    )
    assert [(t.name, t.count, t.nbytes) for t in report.tensor_types] == [
        ("I32", 1, 2048),
        ("F16", 2, 256),
    ]
    assert report.file_bytes == st.stat().st_size and report.context == 512
    assert report.kv[0].bytes_per_token == 3 * 2 * 2 * 16 * 2  # head_dim 64 / 4 heads = 16
