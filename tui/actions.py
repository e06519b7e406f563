"""What the chat's keys do: send, the streamed reply, stop, regenerate, edit, copy, panels."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

from textual.containers import VerticalScroll
from textual.worker import Worker

from localllm.errors import LocalLLMError
from localllm.tui.backend import ChatSettings, ReplyStats
from localllm.tui.base import ChatBase
from localllm.tui.context import fit_messages
from localllm.tui.conversations import ConversationsScreen
from localllm.tui.export import code_blocks, export_conversation
from localllm.tui.keys import MAIN_KEYS
from localllm.tui.screens import HelpScreen, SettingsScreen
from localllm.tui.store import Message
from localllm.tui.widgets import ChatInput, MessageView

# the chat's own key actions (not Textual's, such as focus_next on Tab) are off while a
# dialog is open, except these
_GLOBAL_ACTIONS = {"quit", "help"}
_CHAT_ACTIONS = {k.action.partition("(")[0] for k in MAIN_KEYS if k.action} - _GLOBAL_ACTIONS


class ChatActions(ChatBase):
    def init_actions(self) -> None:
        self.reply_worker: Worker[None] | None = None
        self.editing: Message | None = None
        self._code_index = 0

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in _CHAT_ACTIONS and len(self.screen_stack) > 1:
            return False  # the dialog on top handles its own keys
        return True

    @property
    def busy(self) -> bool:
        return self.reply_worker is not None and self.reply_worker.is_running

    @property
    def chat(self) -> VerticalScroll:
        return self.query_one("#chat", VerticalScroll)

    # ---- sending and the reply ----------------------------------------------------------
    async def on_chat_input_submitted(self, event: ChatInput.Submitted) -> None:
        if self.busy:
            self.notify("Still answering: Esc stops it.", severity="warning")
            return
        if self.backend is None:
            self.notify("No model is loaded yet.", severity="warning")
            return
        assert self.store is not None and self.conv is not None
        self.query_one(ChatInput).clear()
        if self.editing is not None:
            await self._truncate_from(self.editing)
            self.editing = None
            self.query_one(ChatInput).border_title = None
        if not self.conv.messages and self.conv.title == "New chat":
            self.conv.title = " ".join(event.text.split())[:50]
            self.store.rename(self.conv.id, self.conv.title)
            self.sub_title = self.conv.title
        msg = Message("user", event.text.rstrip())
        self.store.add_message(self.conv.id, msg)
        self.conv.messages.append(msg)
        await self.chat.mount(MessageView("user", msg.content, msg.id))
        self.chat.scroll_end(animate=False)
        self.start_reply()

    def start_reply(self) -> None:
        self._code_index = 0
        self.reply_worker = self.run_worker(self._reply(), group="reply", exit_on_error=False)

    async def _reply(self) -> None:
        assert self.backend is not None and self.conv is not None
        backend, settings = self.backend, self.settings
        history = [{"role": m.role, "content": m.content} for m in self.conv.messages]
        try:
            fitted = await asyncio.to_thread(
                fit_messages,
                self.conv.system_prompt,
                history,
                backend.token_counter(),
                backend.context_size,
                settings.max_tokens,
            )
        except LocalLLMError as e:
            await self.add_notice(f"Not sent: {e}", "error")
            return
        if fitted.dropped:
            await self.add_notice(
                f"The conversation is longer than the context ({backend.context_size} tokens): "
                f"the {fitted.dropped} oldest messages were left out of this prompt.",
                "warning",
            )
        view = MessageView("assistant")
        await self.chat.mount(view)
        self.set_state("answering")
        stats, error, stopped = None, None, False
        try:
            async with aclosing(backend.stream(fitted.messages, settings)) as chunks:
                async for chunk in chunks:
                    await view.append(chunk.text)
                    stats = chunk.stats or stats
                    self.chat.scroll_end(animate=False)
        except asyncio.CancelledError:  # Esc: leaving the stream aborted the request
            stopped = True
        except LocalLLMError as e:
            error = str(e)
        await self._finish_reply(view, stats, stopped, error)

    async def _finish_reply(
        self, view: MessageView, stats: ReplyStats | None, stopped: bool, error: str | None
    ) -> None:
        assert self.store is not None and self.conv is not None
        footer = "stopped" if stopped else (f"error: {error}" if error else _footer(stats))
        await view.finish(footer)
        if view.content.strip():
            saved = stats.as_dict() if stats else {"finish_reason": "abort" if stopped else "error"}
            msg = Message("assistant", view.content, stats=saved)
            self.store.add_message(self.conv.id, msg)
            self.conv.messages.append(msg)
            view.message_id = msg.id
        else:
            await view.remove()
        if error:
            await self.add_notice(f"The answer failed: {error}", "error")
        elif stopped and not view.content.strip():
            await self.add_notice("Stopped before the first token.")
        # a stopped or failed answer has no figures: never show the previous answer's
        self.info.last = stats
        self.info.context_used = stats.prompt_tokens + stats.completion_tokens if stats else None
        self.set_state("ready")
        await self.refresh_pool()

    # ---- keys ---------------------------------------------------------------------------
    def action_stop(self) -> None:
        if self.busy and self.reply_worker is not None and self.backend is not None:
            self.backend.stop()  # abort in the engine now, then unwind the reply
            self.reply_worker.cancel()
        elif self.editing is not None:
            self.editing = None
            inp = self.query_one(ChatInput)
            inp.clear()
            inp.border_title = None

    async def action_regenerate(self) -> None:
        if self.busy or self.backend is None or self.conv is None or not self.conv.messages:
            return
        last = self.conv.messages[-1]
        if last.role == "assistant":
            await self._truncate_from(last)
        if self.conv.messages and self.conv.messages[-1].role == "user":
            self.start_reply()

    def action_edit_last(self) -> None:
        if self.busy or self.conv is None:
            return
        users = [m for m in self.conv.messages if m.role == "user"]
        if not users:
            return
        self.editing = users[-1]
        inp = self.query_one(ChatInput)
        inp.text = self.editing.content
        inp.border_title = "editing the last message · Enter resends · Esc cancels"
        inp.focus()

    async def _truncate_from(self, msg: Message) -> None:
        """Delete msg and everything after it (store, memory and screen)."""
        assert self.store is not None and self.conv is not None and msg.id is not None
        self.store.delete_messages_from(self.conv.id, msg.id)
        keep = next(i for i, m in enumerate(self.conv.messages) if m.id == msg.id)
        self.conv.messages = self.conv.messages[:keep]
        views = list(self.chat.query(MessageView))
        start = next((i for i, v in enumerate(views) if v.message_id == msg.id), len(views))
        for v in views[start:]:
            await v.remove()

    def _last_answer(self) -> str | None:
        answers = [m for m in (self.conv.messages if self.conv else []) if m.role == "assistant"]
        return answers[-1].content if answers else None

    def action_copy_answer(self) -> None:
        text = self._last_answer()
        if text is None:
            self.notify("No answer to copy yet.", severity="warning")
            return
        self.copy_to_clipboard(text)
        self.notify("Copied the last answer.")

    def action_copy_code(self) -> None:
        blocks = code_blocks(self._last_answer() or "")
        if not blocks:
            self.notify("The last answer has no code block.", severity="warning")
            return
        i = len(blocks) - 1 - self._code_index % len(blocks)  # last first, then earlier ones
        self._code_index += 1
        self.copy_to_clipboard(blocks[i])
        self.notify(f"Copied code block {i + 1} of {len(blocks)}.")

    def action_settings(self) -> None:
        assert self.conv is not None
        self.push_screen(
            SettingsScreen(self.conv.system_prompt, self.settings), self._settings_saved
        )

    def _settings_saved(self, result: tuple[str, ChatSettings] | None) -> None:
        if result is None or self.store is None or self.conv is None:
            return
        system, self.settings = result
        self.conv.system_prompt = system
        self.store.set_system_prompt(self.conv.id, system)
        self.store.set_setting("system_prompt", system)
        self.store.set_setting("sampling", self.settings.__dict__)
        self.notify("Settings saved.")

    def action_conversations(self) -> None:
        assert self.store is not None
        if self.busy:
            self.notify("Stop the answer first (Esc).", severity="warning")
            return
        current = self.conv.id if self.conv else None
        screen = ConversationsScreen(self.store, self.options.export_dir, current)
        self.push_screen(screen, self._conversation_chosen)

    async def _conversation_chosen(self, result: tuple[str, int | None] | None) -> None:
        assert self.store is not None and self.conv is not None
        if result is not None:
            await self.open_conversation(result[1] if result[0] == "open" else None)
            return
        ids = {c.id for c in self.store.list()}
        await self.open_conversation(self.conv.id if self.conv.id in ids else None)

    async def action_new_conversation(self) -> None:
        if not self.busy:
            await self.open_conversation(None)

    def action_export(self) -> None:
        assert self.store is not None and self.conv is not None
        path = export_conversation(self.store.load(self.conv.id), self.options.export_dir)
        self.notify(f"Exported to {path}")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_scroll_chat(self, direction: int) -> None:
        if direction < 0:
            self.chat.scroll_page_up()
        else:
            self.chat.scroll_page_down()


def _footer(stats: ReplyStats | None) -> str:
    if stats is None:
        return ""
    parts: list[Any] = [f"{stats.completion_tokens} tokens"]
    if stats.tokens_per_s:
        parts.append(f"{stats.tokens_per_s:.1f} tok/s")
    if stats.finish_reason == "length":
        parts.append("cut at max tokens")
    return " · ".join(parts)
