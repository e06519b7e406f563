"""Where llama.cpp's benchmark programs are: `--compare llama.cpp` looks on PATH,
`--compare llama.cpp=DIR` in DIR (a build's bin folder)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from localllm.errors import LocalLLMError

ENGINES = ("llama.cpp",)  # what --compare accepts
PROGRAMS = ("llama-bench", "llama-batched-bench")


@dataclass(frozen=True)
class Tools:
    bench: str | None  # llama-bench
    batched: str | None  # llama-batched-bench


def _find(name: str, folder: str | None) -> str | None:
    if folder is None:
        return shutil.which(name)
    p = Path(folder) / name
    return str(p) if p.is_file() and os.access(p, os.X_OK) else None


def find_tools(spec: str) -> Tools:
    """Tools for a --compare value; at least one of the two programs must be there."""
    engine, _, folder = spec.partition("=")
    if engine not in ENGINES:
        raise LocalLLMError(f"--compare takes llama.cpp or llama.cpp=DIR, got {spec!r}")
    if folder and not Path(folder).is_dir():
        raise LocalLLMError(f"--compare {spec}: {folder} is not a folder")
    tools = Tools(
        _find("llama-bench", folder or None), _find("llama-batched-bench", folder or None)
    )
    if tools.bench is None and tools.batched is None:
        where = folder or "PATH"
        raise LocalLLMError(
            f"--compare {spec}: neither llama-bench nor llama-batched-bench is in {where} "
            "(build llama.cpp's tools, or give their folder: --compare llama.cpp=DIR)"
        )
    return tools
