"""Model sources: from a path, one `ModelSource` (config, tensors, tokenizer, chat template).

| module | what it is |
| --- | --- |
| `base.py` | `ModelSource`, the `Tensors` protocol |
| `gguf.py` | a `.gguf` file |
| `hf.py` | a Hugging Face folder (`config.json`, safetensors, `tokenizer.json`) |
| `hf_config.py` | ModelConfig from config.json (pure) |
| `hf_tensors.py` | safetensors shards under the engine's tensor names, memory-mapped |
| `hf_files.py` | which files a folder holds (configs, shards, index) |
"""

from __future__ import annotations

import os
from collections.abc import Callable

from localllm.sources.base import ModelSource, Tensors
from localllm.sources.gguf import open_gguf
from localllm.sources.hf import open_hf_folder

# (claims this path, opens it), first match wins: folders are Hugging Face checkpoints,
# everything else is read as GGUF (which says "no such file" or "not a GGUF file" itself)
OPENERS: list[tuple[Callable[[str], bool], Callable[[str], ModelSource]]] = [
    (os.path.isdir, open_hf_folder),
    (lambda path: True, open_gguf),
]


def open_model(path: str | os.PathLike[str]) -> ModelSource:
    """The model at `path`; anything unreadable or unsupported is a one-line ModelLoadError."""
    p = os.fspath(path)
    opener = next(open_ for claims, open_ in OPENERS if claims(p))
    return opener(p)


__all__ = ["ModelSource", "Tensors", "open_model"]
