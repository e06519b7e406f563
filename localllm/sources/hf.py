"""A Hugging Face model folder as a ModelSource.

config.json -> ModelConfig (`hf_config`), safetensors shards -> tensors (`hf_tensors`),
tokenizer.json + tokenizer_config.json + generation_config.json -> Tokenizer
(`tokenizer/hf.py`), chat_template.jinja or tokenizer_config.json's `chat_template` ->
ChatTemplate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localllm.chat_template import ChatTemplate
from localllm.errors import LocalLLMError, ModelLoadError
from localllm.sources.base import ModelSource
from localllm.sources.hf_config import model_config_from_hf
from localllm.sources.hf_files import read_json, shard_files
from localllm.sources.hf_quant import quant_scheme
from localllm.sources.hf_tensors import SafetensorsTensors
from localllm.tokenizer import Tokenizer
from localllm.tokenizer.hf import hf_tokenizer

FORMAT = "Hugging Face folder"


def folder_tokenizer(folder: Path, cfg_json: dict[str, Any], vocab_size: int) -> Tokenizer:
    """tokenizer.json + tokenizer_config.json + generation_config.json (config.json ids under
    it) -> Tokenizer; vocab_size: the model's embedding rows."""
    file = folder / "tokenizer.json"
    if not file.is_file():
        raise ModelLoadError(str(folder), "no tokenizer.json in the folder")
    tok_cfg = read_json(folder / "tokenizer_config.json", required=False)
    ids: dict[str, Any] = {
        k: cfg_json[k] for k in ("bos_token_id", "eos_token_id") if k in cfg_json
    }
    ids.update(read_json(folder / "generation_config.json", required=False))
    try:
        return hf_tokenizer(file.read_text(encoding="utf-8"), tok_cfg, ids, vocab_size)
    except (OSError, LocalLLMError) as e:
        raise ModelLoadError(str(file), str(e)) from None


def chat_template_text(folder: Path, tok_cfg: dict[str, Any]) -> tuple[str | None, str]:
    """(template, where it came from): chat_template.jinja, else tokenizer_config.json's
    `chat_template` (a string, or a list of named templates: the "default" one)."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8"), jinja.name
    t = tok_cfg.get("chat_template")
    if isinstance(t, list):
        named = {d.get("name"): d.get("template") for d in t if isinstance(d, dict)}
        t = named.get("default", next(iter(named.values()), None))
    return (t if isinstance(t, str) else None), "tokenizer_config.json"


def open_hf_folder(path: str) -> ModelSource:
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise ModelLoadError(path, "is a folder without config.json")
    cfg_json = read_json(folder / "config.json")
    scheme = quant_scheme(cfg_json, path)
    config = model_config_from_hf(cfg_json, path)
    files = shard_files(folder)
    tensors = SafetensorsTensors(folder, files, config, scheme)
    tokenizer = folder_tokenizer(folder, cfg_json, config.vocab_size)
    template, origin = chat_template_text(
        folder, read_json(folder / "tokenizer_config.json", required=False)
    )
    size = sum(f.stat().st_size for f in files)
    return ModelSource(
        path=path,
        format=FORMAT,
        config=config,
        tensors=tensors,
        tokenizer=tokenizer,
        chat_template=ChatTemplate.from_model(template, tokenizer, origin),
        model_id=f"{folder.resolve()}:{size}",
    )
