"""ChatApp: the Textual chat's layout and start-up (load a model, connect to a server, pick a
model, serve the API). Its state and status line live in base.py, the keys in actions.py,
the model (or server) connection in backend.py/remote.py, conversations in store.py."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static

from localllm.errors import LocalLLMError
from localllm.hub.discovery import FoundModel, discover
from localllm.tui.actions import ChatActions
from localllm.tui.backend import Backend, ChatSettings, LocalBackend
from localllm.tui.base import ChatOptions
from localllm.tui.keys import MAIN_KEYS
from localllm.tui.remote import RemoteBackend
from localllm.tui.screens import ModelPickerScreen
from localllm.tui.serve import make_server
from localllm.tui.store import Store, default_db_path
from localllm.tui.widgets import ChatInput

# keys a focused TextArea would otherwise take for itself
_PRIORITY = {"ctrl+e", "pageup", "pagedown"}


class ChatApp(ChatActions):
    CSS_PATH = "chat.tcss"
    TITLE = "localllm chat"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding(
            k.keys,
            k.action,
            k.footer or k.description,
            show=bool(k.footer),
            priority=k.keys in _PRIORITY,
        )
        for k in MAIN_KEYS
        if k.keys
    ]

    def __init__(self, options: ChatOptions, backend: Backend | None = None) -> None:
        super().__init__(options, backend)
        self.init_actions()

    def compose(self) -> ComposeResult:
        yield Header(icon="")
        yield VerticalScroll(id="chat")
        yield ChatInput(id="input", soft_wrap=True, show_line_numbers=False)
        yield Static("", id="status", markup=False)
        yield Footer()

    # ---- start-up -----------------------------------------------------------------------
    async def on_mount(self) -> None:
        self.store = Store(self.options.db_path or default_db_path())
        if self.options.settings is None:
            self.settings = self._stored_settings()
        convs = self.store.list()
        await self.open_conversation(convs[0].id if convs else None)
        self.query_one(ChatInput).focus()
        self.run_worker(self._start_backend(), group="backend", exit_on_error=False)

    def _stored_settings(self) -> ChatSettings:
        assert self.store is not None
        try:
            return ChatSettings(**self.store.get_setting("sampling", {}))
        except (TypeError, LocalLLMError):
            return ChatSettings()

    async def _start_backend(self) -> None:
        if self.backend is not None:
            await self.backend_ready(self.backend)
        elif self.options.url:
            await self._connect(self.options.url)
        elif self.options.model:
            await self.load_model(self.options.model)
        else:
            self.set_state("pick a model")
            models = await asyncio.to_thread(discover, self.options.models_dirs)
            self.push_screen(ModelPickerScreen(models), self._picked)

    def _picked(self, model: FoundModel | None) -> None:
        if model is None:
            self.exit()
            return
        self.run_worker(self.load_model(str(model.path)), group="backend", exit_on_error=False)

    async def _connect(self, url: str) -> None:
        self.set_state(f"connecting to {url}")
        backend = RemoteBackend(url, self.options.remote_model, self.options.api_key)
        try:
            await backend.connect()
        except LocalLLMError as e:
            await backend.close()
            await self.fail(f"Could not connect: {e}")
            return
        await self.backend_ready(backend)

    async def load_model(self, path: str) -> None:
        self.info.model = Path(path).name
        self.set_state(f"loading {Path(path).name}")
        make_cfg = self.options.engine_config
        if make_cfg is None:
            from localllm.config import EngineConfig

            make_cfg = EngineConfig
        try:
            backend = await LocalBackend.load(make_cfg(path), self._load_stage)
        except (LocalLLMError, ValueError, OSError, RuntimeError) as e:
            await self.fail(f"Could not load the model {path}: {e}")
            return
        await self.backend_ready(backend)

    def _load_stage(self, stage: str) -> None:
        """The engine's start-up stages in the status line (called from the loading thread)."""
        self.call_from_thread(self.set_state, stage)

    async def backend_ready(self, backend: Backend) -> None:
        self.backend = backend
        self.info.model = backend.model_name
        self.info.context_size = backend.context_size
        self.set_state("ready")
        if isinstance(backend, LocalBackend) and backend.template_fallback:
            await self.add_notice(
                f"{backend.model_name} has no chat template: "
                f"using the built-in {backend.template_fallback} template."
            )
        if self.options.serve and isinstance(backend, LocalBackend):
            self._start_server(backend)
        await self.refresh_pool()

    def _start_server(self, backend: LocalBackend) -> None:
        try:
            self.server, sock = make_server(
                backend.engine, backend.model_name, self.options.host, self.options.port
            )
        except LocalLLMError as e:
            self.run_worker(self.fail(f"Not serving: {e}", state="ready"))
            return
        self.run_worker(self._serve(sock), group="server", exit_on_error=False)

    async def _serve(self, sock: socket.socket) -> None:
        host, port = sock.getsockname()[:2]
        self.serving_url = f"http://{host}:{port}/v1"
        self.notify(f"Serving the OpenAI API at {self.serving_url}")
        try:
            await self.server.serve(sockets=[sock])
        except (SystemExit, OSError) as e:
            await self.fail(f"The HTTP server at {self.serving_url} stopped: {e}", state="ready")

    async def on_unmount(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.backend is not None:
            await self.backend.close()
        if self.store is not None:
            self.store.close()
