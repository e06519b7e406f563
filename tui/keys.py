"""Every key of the chat, in one table: the app's bindings, the help screen and docs/chat.md
are all built from (or checked against) it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    keys: str  # Textual key names, comma separated ("" = handled by a widget, not a binding)
    label: str  # how the help screen and the docs write it
    action: str  # the ChatApp action ("" for widget keys)
    description: str
    footer: str = ""  # short label: shown in the footer when set


MAIN_KEYS: tuple[Key, ...] = (
    Key("", "Enter", "", "send the message"),
    Key("", "Ctrl+J / Shift+Enter", "", "insert a newline in the message"),
    Key("escape", "Esc", "stop", "stop the answer at once (or cancel editing)", "stop"),
    Key("ctrl+r", "Ctrl+R", "regenerate", "regenerate the last answer", "regenerate"),
    Key("ctrl+e", "Ctrl+E", "edit_last", "edit the last message, Enter resends it"),
    Key("ctrl+t", "Ctrl+T", "copy_answer", "copy the last answer to the clipboard"),
    Key("ctrl+b", "Ctrl+B", "copy_code", "copy a code block of the last answer (repeat: previous)"),
    Key(
        "ctrl+s,f2",
        "Ctrl+S / F2",
        "settings",
        "settings: system prompt, temperature, top-p, max tokens",
        "settings",
    ),
    Key(
        "ctrl+o,f3",
        "Ctrl+O / F3",
        "conversations",
        "conversations: open, rename, delete, export",
        "chats",
    ),
    Key("ctrl+n", "Ctrl+N", "new_conversation", "start a new conversation", "new"),
    Key("f5", "F5", "export", "export this conversation to Markdown"),
    Key("pageup", "PageUp", "scroll_chat(-1)", "scroll the conversation up"),
    Key("pagedown", "PageDown", "scroll_chat(1)", "scroll the conversation down"),
    Key("f1", "F1", "help", "this help", "help"),
    Key("ctrl+q", "Ctrl+Q", "quit", "quit", "quit"),
)

CONVERSATION_KEYS: tuple[Key, ...] = (
    Key("enter", "Enter", "open", "open the selected conversation"),
    Key("r", "R", "rename", "rename it"),
    Key("d", "D", "delete", "delete it (press twice)"),
    Key("e", "E", "export", "export it to Markdown"),
    Key("n", "N", "new", "start a new conversation"),
    Key("escape", "Esc", "close", "back to the chat"),
)

SETTINGS_KEYS: tuple[Key, ...] = (
    Key("ctrl+s", "Ctrl+S", "save", "save the settings"),
    Key("tab", "Tab / Shift+Tab", "", "next / previous field"),
    Key("escape", "Esc", "close", "close without saving"),
)

PICKER_KEYS: tuple[Key, ...] = (
    Key("enter", "Enter", "", "load the selected model"),
    Key("escape", "Esc / Ctrl+Q", "quit", "quit"),
)

SECTIONS: tuple[tuple[str, tuple[Key, ...]], ...] = (
    ("Chat", MAIN_KEYS),
    ("Conversations (Ctrl+O)", CONVERSATION_KEYS),
    ("Settings (Ctrl+S)", SETTINGS_KEYS),
    ("Model picker (no --model)", PICKER_KEYS),
)


def help_markdown() -> str:
    """The help screen's text: one table per section."""
    out = ["# Keys", ""]
    for title, keys in SECTIONS:
        out += [f"## {title}", "", "| key | what it does |", "| --- | --- |"]
        out += [f"| {k.label} | {k.description} |" for k in keys]
        out.append("")
    return "\n".join(out)
