"""`localllm serve`: OpenAI-compatible, llama.cpp and Ollama HTTP APIs over the AsyncEngine.

Module map: app (assembly) · settings · state (background model load) · context (per-app
objects for routes) · schemas, schemas_llamacpp, schemas_ollama (request bodies) · fields
(unimplemented fields, lone surrogates) · params (-> SamplingParams, `samplers`) · prompts
(chat, completion, FIM ids) · offload (prompt work in threads, size bounds) · generation
(merged engine streams) · limits (llama.cpp time/indent limits) · warmer (prompt-only cache
jobs) · llamacpp, ollama_answer, ollama_model (native answer shapes) · responses (OpenAI
bodies) · sse · safety (Host, Origin, content type) · middleware (auth, body limit, counts) ·
metrics (Prometheus) · errors (error shapes) · routes_* (one file per endpoint family) ·
background (a server in a thread: tests, the UI).
"""

from __future__ import annotations

from localllm.server.app import create_app
from localllm.server.settings import ServerSettings

__all__ = ["ServerSettings", "create_app"]
