"""config.json -> ModelConfig, and the one-line errors of folders we cannot run."""

from __future__ import annotations

import json
import shutil

import pytest
from hf_build import build_hf_folder

from localllm.config import RopeScaling
from localllm.errors import ModelLoadError
from localllm.sources import open_model
from localllm.sources.hf_config import model_config_from_hf

QWEN2 = {
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "use_sliding_window": False,
    "tie_word_embeddings": True,
    "vocab_size": 151936,
}


def test_qwen2_config():
    c = model_config_from_hf(QWEN2, "m")
    assert (c.arch, c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim) == (
        "qwen2",
        896,
        24,
        14,
        2,
        64,
    )
    assert (c.ffn_dim, c.vocab_size, c.context_length, c.rope_theta) == (4864, 151936, 32768, 1e6)
    assert c.rope_style == "neox" and c.qkv_bias and c.tie_embeddings and not c.qk_norm


def test_llama31_rope_scaling_old_and_new_spelling():
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}  # fmt: skip
    base = dict(QWEN2, architectures=["LlamaForCausalLM"], tie_word_embeddings=False)
    old = model_config_from_hf(dict(base, rope_scaling=scaling, rope_theta=500000.0), "m")
    new_cfg = {k: v for k, v in base.items() if k != "rope_theta"}
    new = model_config_from_hf(
        dict(new_cfg, rope_parameters=dict(scaling, rope_theta=500000.0)), "m"
    )
    want = RopeScaling("llama3", 8.0, 1.0, 4.0, 8192)
    assert old.rope_scaling == new.rope_scaling == want
    assert old.rope_theta == new.rope_theta == 500000.0 and not old.qkv_bias


@pytest.mark.parametrize(
    "change,message",
    [
        ({"architectures": ["GPT2LMHeadModel"]}, "unsupported architecture 'GPT2LMHeadModel' (supported: LlamaForCausalLM"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "unsupported rope scaling type 'yarn'"),
        ({"use_sliding_window": True}, "sliding-window attention"),
        ({"hidden_act": "gelu"}, "unsupported hidden_act 'gelu'"),
        ({"architectures": ["LlamaForCausalLM"], "attention_bias": True}, "attention biases"),
        ({"mlp_bias": True}, "MLP biases"),
        ({"partial_rotary_factor": 0.5}, "partial rotary"),
        ({"hidden_size": "896"}, "hidden_size must be a non-negative integer"),
        ({"num_key_value_heads": 3}, "not a multiple of n_kv_heads"),
        ({"text_config": {}}, "multimodal"),
    ],
)  # fmt: skip
def test_configs_we_cannot_run_are_refused(change, message):
    with pytest.raises(ModelLoadError) as e:
        model_config_from_hf(dict(QWEN2, **change), "path/to/m")
    assert str(e.value).startswith("path/to/m: ") and message in str(e.value)
    assert "\n" not in str(e.value)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from conftest import testdata_path

    return build_hf_folder(
        testdata_path("models", "pycode-22m-q8_0.gguf"), tmp_path_factory.mktemp("f") / "m"
    )


def _broken(folder, tmp_path, edit) -> str:
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    edit(copy)
    with pytest.raises(ModelLoadError) as e:
        open_model(copy)
    return str(e.value)


def _edit_json(name, **change):
    def edit(d):
        data = json.loads((d / name).read_text())
        data.update(change)
        (d / name).write_text(json.dumps(data))

    return edit


def _drop_from_index(name):
    def edit(d):
        index = json.loads((d / "model.safetensors.index.json").read_text())
        file = index["weight_map"][name]
        from safetensors.torch import load_file, save_file

        tensors = load_file(d / file)
        del tensors[name]
        save_file(tensors, d / file)

    return edit


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: (d / "config.json").unlink(), "is a folder without config.json"),
        (lambda d: (d / "tokenizer.json").unlink(), "no tokenizer.json in the folder"),
        (lambda d: (d / "model-00002-of-00002.safetensors").unlink(), "missing weight file model-00002-of-00002.safetensors"),
        (lambda d: (d / "model-00001-of-00002.safetensors").write_bytes(b"junk"), "not a readable safetensors file"),
        (_edit_json("config.json", num_hidden_layers=5), "unexpected tensor 'model.layers.5.input_layernorm.weight': num_hidden_layers is 5"),
        (_edit_json("config.json", num_hidden_layers=7), "missing tensor 'model.layers.6."),
        (_edit_json("config.json", intermediate_size=1024), "down_proj.weight' has shape [512, 1536], expected [512, 1024]"),
        (_drop_from_index("model.layers.2.mlp.up_proj.weight"), "missing tensor 'model.layers.2.mlp.up_proj.weight'"),
        (_edit_json("config.json", quantization_config={"quant_method": "bitsandbytes"}), "'bitsandbytes'"),
        (lambda d: (d / "tokenizer.json").write_text("{}"), "tokenizer.json: cannot load it"),
        (_edit_json("tokenizer_config.json", eos_token={"content": "</s>"}, add_bos_token=False), None),
    ],
)  # fmt: skip
def test_broken_folders_give_one_line_errors(folder, tmp_path, edit, message):
    if message is None:  # a valid variation: it loads
        copy = tmp_path / "copy"
        shutil.copytree(folder, copy)
        edit(copy)
        tok = open_model(copy).tokenizer
        assert tok.eos_id == 2 and not tok.add_bos
        return
    text = _broken(folder, tmp_path, edit)
    assert message in text and "\n" not in text, text
