"""The conversation list: open, rename, delete (press twice), export, new."""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from localllm.tui.export import export_conversation
from localllm.tui.keys import CONVERSATION_KEYS
from localllm.tui.screens import RenameScreen, bindings
from localllm.tui.store import Conversation, Store


def _label(c: Conversation) -> Text:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.updated))
    return Text(f"{c.title}  ·  {c.num_messages} messages  ·  {when}")


class ConversationsScreen(ModalScreen[tuple[str, int | None] | None]):
    """Dismisses with ("open", id), ("new", None), or None (closed); the current conversation
    may have been renamed or deleted meanwhile (the app reloads it)."""

    BINDINGS = bindings(CONVERSATION_KEYS)

    def __init__(self, store: Store, export_dir: Path, current_id: int | None) -> None:
        super().__init__()
        self.store = store
        self.export_dir = export_dir
        self.current_id = current_id
        self._armed_delete: int | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="conversations", classes="dialog"):
            yield Label("Conversations", classes="title")
            yield OptionList(id="conversation-list")
            yield Static("", id="conversations-info", markup=False)
            yield Static(
                "Enter open · R rename · D delete · E export · N new · Esc back", classes="hint"
            )

    def on_mount(self) -> None:
        self.refresh_list()

    def refresh_list(self, select: int | None = None) -> None:
        ol = self.query_one(OptionList)
        ol.clear_options()
        convs = self.store.list()
        ol.add_options([Option(_label(c), id=str(c.id)) for c in convs])
        ids = [c.id for c in convs]
        target = select if select in ids else self.current_id
        if ids:
            ol.highlighted = ids.index(target) if target in ids else 0
        ol.focus()

    def selected_id(self) -> int | None:
        ol = self.query_one(OptionList)
        if ol.highlighted is None or ol.option_count == 0:
            return None
        return int(ol.get_option_at_index(ol.highlighted).id or 0)

    def info(self, text: str) -> None:
        self.query_one("#conversations-info", Static).update(text)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        cid = self.selected_id()
        if cid is not None:
            self.dismiss(("open", cid))

    def action_new(self) -> None:
        self.dismiss(("new", None))

    def action_close(self) -> None:
        self.dismiss(None)

    def action_rename(self) -> None:
        cid = self.selected_id()
        if cid is None:
            return

        def done(title: str | None) -> None:
            if title:
                self.store.rename(cid, title)
                self.refresh_list(select=cid)

        self.app.push_screen(RenameScreen(self.store.load(cid).title), done)

    def action_delete(self) -> None:
        cid = self.selected_id()
        if cid is None:
            return
        if self._armed_delete != cid:
            self._armed_delete = cid
            self.info("Press D again to delete this conversation.")
            return
        self._armed_delete = None
        self.store.delete(cid)
        self.info("Deleted.")
        self.refresh_list()

    def action_export(self) -> None:
        cid = self.selected_id()
        if cid is not None:
            path = export_conversation(self.store.load(cid), self.export_dir)
            self.info(f"Exported to {path}")
