"""The engine behind the app: loaded in a background thread after the server starts.

Until it is ready, `/health` answers 503 `{"status": "loading"}` and every other route 503.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from localllm.engine.async_engine import AsyncEngine
from localllm.server.errors import APIError
from localllm.server.settings import LoadStatus

log = logging.getLogger("localllm.server")


class EngineHolder:
    def __init__(
        self,
        load: Callable[[], AsyncEngine],
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._load = load
        self._on_error = on_error
        self._engine: AsyncEngine | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.status = LoadStatus()

    def start(self) -> None:
        """Begin loading in a background thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="localllm-load", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            engine = self._load()
        except BaseException as e:  # noqa: BLE001 - reported on /health and to the caller
            log.error("loading the model failed: %s", e)
            self.status.state, self.status.error = "error", str(e)
            if self._on_error is not None:
                self._on_error(e)
            return
        if self._closed:  # the server stopped while we were loading
            engine.shutdown()
            return
        self._engine = engine
        self.status.seconds = time.perf_counter() - t0
        self.status.state = "ok"
        log.info("model loaded in %.1f s", self.status.seconds)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until loading ended (either way); True when the engine is ready."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self._engine is not None

    @property
    def ready(self) -> bool:
        return self._engine is not None

    def get(self) -> AsyncEngine:
        """The engine, or a 503 APIError while loading (or after a failed load)."""
        if self._engine is not None:
            return self._engine
        if self.status.state == "error":
            raise APIError(
                503, f"the model failed to load: {self.status.error}", code="model_load_failed"
            )
        raise APIError(503, "the model is still loading; retry shortly", code="model_loading")

    def close(self) -> None:
        self._closed = True
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None
