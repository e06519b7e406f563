"""`localllm serve`: an OpenAI-compatible HTTP API over the AsyncEngine.

Module map: app (assembly) · settings · state (background model load) · context (per-app
objects for routes) · schemas (request bodies) · params (-> SamplingParams) · prompts (chat,
completion, FIM ids) · generation (merged engine streams) · responses (OpenAI bodies) · sse ·
middleware (auth, body limit, counts) · metrics (Prometheus) · errors (OpenAI error shape) ·
routes_* (one file per endpoint family) · background (a server in a thread: tests, the UI).
"""

from __future__ import annotations

from localllm.server.app import create_app
from localllm.server.settings import ServerSettings

__all__ = ["ServerSettings", "create_app"]
