"""The files of a Hugging Face model folder: JSON configs and the safetensors shards.

`is_hf_folder`, `weight_files` and `folder_size` only look at names (discovery and `list` call
them for every folder they meet); `read_json` and `shard_files` are what loading reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from localllm.errors import ModelLoadError

INDEX = "model.safetensors.index.json"


def is_hf_folder(path: Path) -> bool:
    """A folder with `config.json` and at least one safetensors file."""
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def weight_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.safetensors"))


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in weight_files(path))


def read_json(path: Path, required: bool = True) -> dict[str, Any]:
    """A JSON object file; a missing optional one is {}."""
    if not path.is_file():
        if required:
            raise ModelLoadError(str(path.parent), f"no {path.name} in the folder")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelLoadError(str(path), f"cannot read it ({e})") from None
    if not isinstance(data, dict):
        raise ModelLoadError(str(path), "not a JSON object")
    return data


def shard_files(folder: Path) -> list[Path]:
    """The safetensors files holding the weights: the ones the index names (all present),
    else every *.safetensors file of the folder."""
    index = folder / INDEX
    if index.is_file():
        weight_map = read_json(index).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelLoadError(str(index), "has no weight_map")
        names = sorted({str(v) for v in weight_map.values()})
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ModelLoadError(str(folder), f"missing weight file {missing[0]}{more}")
        return [folder / n for n in names]
    files = weight_files(folder)
    if not files:
        raise ModelLoadError(str(folder), "no *.safetensors weight files in the folder")
    return files
