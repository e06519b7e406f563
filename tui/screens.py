"""Modal screens: help, settings, rename, the model picker."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Markdown, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from localllm.errors import LocalLLMError
from localllm.hub.discovery import HOW_TO_GET_A_MODEL, FoundModel, format_size
from localllm.tui.backend import ChatSettings
from localllm.tui.keys import PICKER_KEYS, SETTINGS_KEYS, Key, help_markdown


def bindings(keys: tuple[Key, ...]) -> list[BindingType]:
    return [
        Binding(k.keys, k.action, k.footer or k.description, show=bool(k.footer))
        for k in keys
        if k.keys and k.action
    ]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help", classes="dialog"):
            yield Markdown(help_markdown())
            yield Static("Esc closes this help.", classes="hint")


class SettingsScreen(ModalScreen[tuple[str, ChatSettings] | None]):
    """System prompt of this conversation + sampling settings; returns them, or None."""

    BINDINGS = bindings(SETTINGS_KEYS)

    def __init__(self, system_prompt: str, settings: ChatSettings) -> None:
        super().__init__()
        self.system_prompt = system_prompt
        self.settings = settings

    def compose(self) -> ComposeResult:
        s = self.settings
        with Vertical(id="settings", classes="dialog"):
            yield Label("Settings", classes="title")
            yield Label("System prompt (this conversation)")
            yield TextArea(self.system_prompt, id="system-prompt")
            yield Label("Temperature (0 = greedy)")
            yield Input(str(s.temperature), id="temperature", type="number")
            yield Label("Top-p")
            yield Input(str(s.top_p), id="top-p", type="number")
            yield Label("Max tokens per answer")
            yield Input(str(s.max_tokens), id="max-tokens", type="integer")
            yield Static("", id="settings-error", classes="error")
            yield Static("Ctrl+S saves · Esc closes without saving", classes="hint")

    def action_save(self) -> None:
        try:
            settings = ChatSettings(
                temperature=float(self.query_one("#temperature", Input).value),
                top_p=float(self.query_one("#top-p", Input).value),
                max_tokens=int(self.query_one("#max-tokens", Input).value),
            )
        except (ValueError, LocalLLMError) as e:
            self.query_one("#settings-error", Static).update(f"Not saved: {e}")
            return
        self.dismiss((self.query_one("#system-prompt", TextArea).text, settings))

    def action_close(self) -> None:
        self.dismiss(None)


class RenameScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str) -> None:
        super().__init__()
        self.current = title

    def compose(self) -> ComposeResult:
        with Vertical(id="rename", classes="dialog"):
            yield Label("Rename conversation (Enter saves, Esc cancels)")
            yield Input(self.current, id="title")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ModelPickerScreen(ModalScreen[FoundModel | None]):
    """Pick one of the GGUF files found on disk; without any, explain how to get one."""

    BINDINGS = bindings(PICKER_KEYS) + [Binding("ctrl+q", "quit", "quit", show=False)]

    def __init__(self, models: list[FoundModel]) -> None:
        super().__init__()
        self.models = models

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="dialog"):
            if not self.models:
                yield Static(HOW_TO_GET_A_MODEL, id="no-models", markup=False)
                yield Static("Esc quits.", classes="hint")
                return
            yield Label(
                f"Pick a model ({len(self.models)} found) · Enter loads · Esc quits",
                classes="title",
            )
            yield OptionList(
                *[
                    Option(Text(f"{m.name}  ({m.source}, {format_size(m.size)})"), id=str(i))
                    for i, m in enumerate(self.models)
                ],
                id="models",
            )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.models[int(event.option.id or 0)])

    def action_quit(self) -> None:
        self.dismiss(None)
