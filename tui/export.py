"""Markdown out: a conversation as a Markdown document, code blocks out of an answer."""

from __future__ import annotations

import re
from pathlib import Path

from markdown_it import MarkdownIt

from localllm.tui.store import Conversation

ROLE_TITLES = {"system": "System", "user": "User", "assistant": "Assistant"}


def to_markdown(conv: Conversation) -> str:
    """`# title`, an optional model line, the system prompt, then `## User` / `## Assistant`."""
    parts = [f"# {conv.title}", ""]
    if conv.model:
        parts += [f"Model: `{conv.model}`", ""]
    if conv.system_prompt:
        parts += ["## System", "", conv.system_prompt.strip(), ""]
    for msg in conv.messages:
        parts += [f"## {ROLE_TITLES.get(msg.role, msg.role.title())}", "", msg.content.strip(), ""]
    return "\n".join(parts)


def slugify(title: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower()
    return slug[:60] or "chat"


def export_conversation(conv: Conversation, folder: str | Path) -> Path:
    """Write the conversation to <folder>/<slug>-<id>.md and return the path."""
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{slugify(conv.title)}-{conv.id}.md"
    path.write_text(to_markdown(conv), encoding="utf-8")
    return path


def code_blocks(markdown: str) -> list[str]:
    """The contents of the fenced and indented code blocks, in document order."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    return [t.content for t in tokens if t.type in ("fence", "code_block")]
