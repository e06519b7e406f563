"""What every scenario gets (Context) and declares (Scenario)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from localllm.bench.engines import Engines
from localllm.bench.sizes import Sizes


class Skip(Exception):
    """A scenario that cannot run here (the reason is shown and recorded in the JSON)."""


class Progress(Protocol):
    def advance(self, label: str) -> None: ...


@dataclass
class Context:
    sizes: Sizes
    engines: Engines
    bandwidth: float  # measured copy bandwidth, bytes/s (read + write); 0 when unknown
    progress: Progress
    spec_k: int | None = None  # drafts per step of the spec scenario (--spec-tokens; None: the
    # engine's own limit, else bench/spec.py's where speculation is off by default: the CPU)
    spec_prompts: str = "auto"  # prompt set of the spec scenario (--spec-prompts)
    results: dict[str, list[dict]] = field(default_factory=dict)  # rows of earlier scenarios
    notes: list[str] = field(default_factory=list)  # shown under the tables, kept in the JSON

    def ceiling(self, engine: Any, depth: int = 0) -> tuple[float | None, int]:
        """(batch-1 decode ceiling in tok/s, bytes read per token): bandwidth / (weights +
        the KV cache of `depth` tokens); None when no bandwidth was measured."""
        from localllm.engine.kv_cache import bytes_per_block

        r = engine.runner
        kv_per_token = bytes_per_block(engine.model_cfg, r.block_size, r.kv_dtype) / r.block_size
        per_token = int(r.weight_bytes + depth * kv_per_token)
        return (self.bandwidth / per_token if self.bandwidth else None), per_token


@dataclass(frozen=True)
class Scenario:
    name: str
    help: str
    run: Callable[[Context], list[dict]]
    units: Callable[[Sizes], int]  # progress steps the run advances
    context: Callable[[Sizes], int]  # tokens of context (max_model_len) it needs
    concurrency: Callable[[Sizes], int] = lambda s: 1  # most sequences at once
