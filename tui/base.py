"""ChatBase: the chat app's state (options, backend, store, open conversation, status line)
and the helpers every part uses; actions.py adds what the keys do, app.py the start-up."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.containers import VerticalScroll
from textual.widgets import Static

from localllm.tui.backend import Backend, ChatSettings
from localllm.tui.status import StatusInfo, format_status
from localllm.tui.store import Conversation, Message, Store
from localllm.tui.widgets import MessageView, Notice

if TYPE_CHECKING:
    from localllm.config import EngineConfig


@dataclass
class ChatOptions:
    model: str | None = None  # in-process engine on this GGUF file
    url: str | None = None  # or: a client of this OpenAI-compatible server
    remote_model: str | None = None
    api_key: str | None = None
    engine_config: Callable[[str], EngineConfig] | None = None  # model path -> engine config
    models_dirs: tuple[str, ...] = ()
    db_path: Path | None = None
    export_dir: Path = Path(".")
    serve: bool = False
    host: str = "127.0.0.1"
    port: int = 8000
    settings: ChatSettings | None = None  # overrides the stored sampling settings
    system_prompt: str | None = None  # for new conversations


class ChatBase(App[None]):
    def __init__(self, options: ChatOptions, backend: Backend | None = None) -> None:
        super().__init__()
        self.options = options
        self.backend: Backend | None = backend
        self.store: Store | None = None
        self.conv: Conversation | None = None
        self.settings = options.settings or ChatSettings()
        self.info = StatusInfo()
        self.server: Any = None  # uvicorn.Server with --serve
        self.serving_url: str | None = None

    async def fail(self, text: str, state: str = "error") -> None:
        """A readable error in the chat and the status line (never a traceback)."""
        self.set_state(state)
        await self.add_notice(text, "error")

    # ---- conversations ------------------------------------------------------------------
    async def open_conversation(self, conversation_id: int | None) -> None:
        assert self.store is not None
        if conversation_id is None:
            system = self.options.system_prompt
            if system is None:
                system = self.store.get_setting("system_prompt", "")
            self.conv = self.store.create(system_prompt=system)
        else:
            self.conv = self.store.load(conversation_id)
        self.sub_title = self.conv.title
        chat = self.query_one("#chat", VerticalScroll)
        await chat.remove_children()
        await chat.mount_all([MessageView(m.role, m.content, m.id) for m in self.conv.messages])
        chat.scroll_end(animate=False)
        self.info.context_used = _context_used(self.conv.messages)
        self.refresh_status()

    # ---- status -------------------------------------------------------------------------
    def set_state(self, state: str) -> None:
        self.info.state = state
        self.refresh_status()

    def refresh_status(self) -> None:
        for status in self.query("#status").results(Static):  # none before the screen mounts
            status.update(format_status(self.info))

    async def refresh_pool(self) -> None:
        if self.backend is not None:
            self.info.pool = await self.backend.pool_usage()
            self.refresh_status()

    async def add_notice(self, text: str, kind: str = "info") -> None:
        chat = self.query_one("#chat", VerticalScroll)
        await chat.mount(Notice(text, kind))
        chat.scroll_end(animate=False)


def _context_used(messages: list[Message]) -> int | None:
    """Tokens of the last answer's prompt + completion, as recorded with it (0 for a new
    conversation, None when no answer recorded them)."""
    if not messages:
        return 0
    for m in reversed(messages):
        if m.stats and "prompt_tokens" in m.stats:
            return int(m.stats["prompt_tokens"]) + int(m.stats.get("completion_tokens", 0))
    return None
