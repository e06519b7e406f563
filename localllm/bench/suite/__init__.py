"""The scenarios of `localllm bench`, one module each, and the registry that names them."""

from __future__ import annotations

from localllm.bench.suite.base import Context, Scenario, Skip
from localllm.bench.suite.registry import DEFAULT, SCENARIOS, context_needed, resolve_names

__all__ = ["Context", "Scenario", "Skip", "SCENARIOS", "DEFAULT", "context_needed", "resolve_names"]
