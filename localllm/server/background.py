"""A real uvicorn server in a background thread on a loopback port (tests, the chat UI)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from localllm.server.settings import ServerSettings


class BackgroundServer:
    """`with BackgroundServer(app) as s: httpx.get(s.url + "/health")`; port 0 picks a free one."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host, self.port = self._sock.getsockname()[:2]
        config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=30)
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="localllm-http", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        self.server.run(sockets=[self._sock])

    def start(self, timeout: float = 30.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def model_server(
    model: str | Path,
    api_key: str | None = None,
    server: dict[str, Any] | None = None,
    **engine: Any,
) -> BackgroundServer:
    """A started server for one GGUF file (name: the file stem); `server` sets other
    ServerSettings fields, `engine` EngineConfig fields (device="cpu", max_model_len=256 ...)."""
    from localllm.config import EngineConfig
    from localllm.engine.async_engine import AsyncEngine
    from localllm.server.app import create_app

    cfg = EngineConfig(model=str(model), **engine)
    settings = ServerSettings(
        Path(model).stem, (Path(model).name,), api_key, model_path=str(model), **(server or {})
    )
    return BackgroundServer(create_app(settings, lambda: AsyncEngine.from_config(cfg))).start()


def wait_ready(server: BackgroundServer, timeout: float = 60.0) -> None:
    """Block until the app's engine has loaded (raises if loading failed)."""
    holder = server.app.state.ctx.holder
    if not holder.wait(timeout):
        raise RuntimeError(f"model not ready: {holder.status.state} {holder.status.error or ''}")
