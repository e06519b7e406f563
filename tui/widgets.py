"""Chat widgets: the multi-line input, one message (streamed Markdown), notices."""

from __future__ import annotations

from textual import events
from textual.containers import Vertical
from textual.message import Message as TextualMessage
from textual.widgets import Markdown, Static, TextArea
from textual.widgets._markdown import MarkdownStream

from localllm.tui.answer_view import answer_markdown

ROLE_LABELS = {"user": "You", "assistant": "Assistant", "system": "System"}
NEWLINE_KEYS = ("ctrl+j", "shift+enter", "alt+enter")


class ChatInput(TextArea):
    """Enter sends; Ctrl+J (or Shift+Enter where the terminal reports it) inserts a newline."""

    class Submitted(TextualMessage):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            if self.text.strip():
                self.post_message(self.Submitted(self.text))
            return
        if event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)


class MessageView(Vertical):
    """One chat message: a role line and a Markdown body that can be streamed into."""

    def __init__(self, role: str, content: str = "", message_id: int | None = None) -> None:
        super().__init__(classes=f"message {role}")
        self.role = role
        self.content = content
        self.message_id = message_id
        self.border_title = ROLE_LABELS.get(role, role)
        self._stream: MarkdownStream | None = None

    def compose(self):
        yield Markdown(self._shown(), classes="body")

    def _shown(self) -> str:
        """Answers show JSON indented and tool calls as blocks; the content stays as written."""
        return answer_markdown(self.content) if self.role == "assistant" else self.content

    @property
    def body(self) -> Markdown:
        return self.query_one(Markdown)

    async def append(self, text: str) -> None:
        """Add streamed text; MarkdownStream coalesces fragments so updates stay throttled."""
        if not text:
            return
        self.content += text
        if self._stream is None:
            self._stream = Markdown.get_stream(self.body)
        await self._stream.write(text)

    async def finish(self, footer: str = "") -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        shown = self._shown()
        if shown != self.content:
            await self.body.update(shown)
        self.border_subtitle = footer


class Notice(Static):
    """A line in the chat that is not a message: dropped turns, refusals, errors."""

    def __init__(self, text: str, kind: str = "info") -> None:
        super().__init__(text, classes=f"notice {kind}", markup=False)
        self.kind = kind
