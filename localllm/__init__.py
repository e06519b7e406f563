"""localllm: fast local LLM inference for NVIDIA gaming PCs."""

from __future__ import annotations

__version__ = "0.1.0"
