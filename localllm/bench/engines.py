"""The engines one `localllm bench` run needs (the main one; one per KV dtype of the kv
scenario; one with speculation for spec), kept one at a time: a second copy of an 8B model
would not fit a gaming GPU beside the first."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable
from typing import Any

from localllm.config import EngineConfig


class Engines:
    def __init__(self, base: EngineConfig, build: Callable[[EngineConfig], Any]) -> None:
        self.base = base
        self._build = build
        self._cfg: EngineConfig | None = None
        self._engine: Any = None
        self.builds = 0  # engines built so far (load time shows in the run's wall time)

    def get(self, **overrides: Any) -> Any:
        """The engine of the base config with these fields replaced, built (after dropping the
        one alive) unless it is the one alive. Callers must not keep a reference to an engine
        across a get() that may build another (it would stay in GPU memory)."""
        cfg = dataclasses.replace(self.base, **overrides)
        if self._engine is not None and cfg == self._cfg:
            return self._engine
        self.close()
        self._engine = self._build(cfg)
        self._cfg = cfg
        self.builds += 1
        return self._engine

    def main(self) -> Any:
        return self.get()

    def close(self) -> None:
        """Drop the engine alive and give its GPU memory back."""
        if self._engine is None:
            return
        self._engine.close()  # frees its KV pool, CUDA graphs and weights now
        self._engine = self._cfg = None
        gc.collect()
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
