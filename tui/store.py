"""Conversations in SQLite (stdlib sqlite3) under the user's data dir.

Schema: `conversations` (title, system prompt, timestamps), `messages` (role, content, the
answer's stats as JSON, ordered by `position`), `settings` (key -> JSON value, the sampling
settings the user chose last).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DB_ENV = "LOCALLLM_CHAT_DB"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    stats TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, position);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def default_db_path() -> Path:
    """$LOCALLLM_CHAT_DB, else <user data dir>/localllm/chat.sqlite3."""
    if os.environ.get(DB_ENV):
        return Path(os.environ[DB_ENV]).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("localllm")) / "chat.sqlite3"


@dataclass
class Message:
    role: str  # "user" | "assistant"
    content: str
    id: int | None = None
    stats: dict | None = None


@dataclass
class Conversation:
    id: int
    title: str
    system_prompt: str = ""
    model: str = ""
    created: float = 0.0
    updated: float = 0.0
    messages: list[Message] = field(default_factory=list)
    num_messages: int = 0


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA foreign_keys = ON")
        self._db.executescript(_SCHEMA)
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    # ---- conversations ------------------------------------------------------------------
    def create(
        self, title: str = "New chat", system_prompt: str = "", model: str = ""
    ) -> Conversation:
        now = time.time()
        cur = self._db.execute(
            "INSERT INTO conversations (title, system_prompt, model, created, updated) "
            "VALUES (?, ?, ?, ?, ?)",
            (title, system_prompt, model, now, now),
        )
        self._db.commit()
        return Conversation(int(cur.lastrowid or 0), title, system_prompt, model, now, now)

    def list(self) -> list[Conversation]:
        """All conversations, most recently updated first (messages not loaded)."""
        rows = self._db.execute(
            "SELECT c.*, (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS n "
            "FROM conversations c ORDER BY c.updated DESC, c.id DESC"
        ).fetchall()
        return [self._conversation(r, num_messages=r["n"]) for r in rows]

    def load(self, conversation_id: int) -> Conversation:
        row = self._db.execute(
            "SELECT * FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        if row is None:
            raise KeyError(f"no conversation {conversation_id}")
        conv = self._conversation(row)
        conv.messages = [
            Message(
                m["role"], m["content"], m["id"], json.loads(m["stats"]) if m["stats"] else None
            )
            for m in self._db.execute(
                "SELECT * FROM messages WHERE conversation_id = ? ORDER BY position",
                (conversation_id,),
            )
        ]
        conv.num_messages = len(conv.messages)
        return conv

    @staticmethod
    def _conversation(row: sqlite3.Row, num_messages: int = 0) -> Conversation:
        return Conversation(
            row["id"],
            row["title"],
            row["system_prompt"],
            row["model"],
            row["created"],
            row["updated"],
            [],
            num_messages,
        )

    def rename(self, conversation_id: int, title: str) -> None:
        self._update(conversation_id, "title", title)

    def set_system_prompt(self, conversation_id: int, text: str) -> None:
        self._update(conversation_id, "system_prompt", text)

    def set_model(self, conversation_id: int, model: str) -> None:
        self._update(conversation_id, "model", model)

    def _update(self, conversation_id: int, column: str, value: str) -> None:
        # column names come from the three callers above, never from the user
        self._db.execute(
            f"UPDATE conversations SET {column} = ?, updated = ? WHERE id = ?",
            (value, time.time(), conversation_id),
        )
        self._db.commit()

    def delete(self, conversation_id: int) -> None:
        self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        self._db.commit()

    # ---- messages -----------------------------------------------------------------------
    def add_message(self, conversation_id: int, message: Message) -> int:
        pos = self._db.execute(
            "SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE conversation_id = ?",
            (conversation_id,),
        ).fetchone()[0]
        now = time.time()
        cur = self._db.execute(
            "INSERT INTO messages (conversation_id, position, role, content, stats, created) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                conversation_id,
                pos,
                message.role,
                message.content,
                json.dumps(message.stats) if message.stats else None,
                now,
            ),
        )
        self._db.execute(
            "UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id)
        )
        self._db.commit()
        message.id = int(cur.lastrowid or 0)
        return message.id

    def update_message(self, message: Message) -> None:
        self._db.execute(
            "UPDATE messages SET content = ?, stats = ? WHERE id = ?",
            (message.content, json.dumps(message.stats) if message.stats else None, message.id),
        )
        self._db.commit()

    def delete_messages_from(self, conversation_id: int, message_id: int) -> None:
        """Delete message `message_id` and every later message of the conversation."""
        self._db.execute(
            "DELETE FROM messages WHERE conversation_id = ? AND position >= "
            "(SELECT position FROM messages WHERE id = ?)",
            (conversation_id, message_id),
        )
        self._db.commit()

    # ---- settings -----------------------------------------------------------------------
    def get_setting(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return json.loads(row["value"]) if row else default

    def set_setting(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT INTO settings (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value)),
        )
        self._db.commit()
