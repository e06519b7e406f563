"""Conversation store, Markdown export, context fitting, status line, key table."""

from __future__ import annotations

from pathlib import Path

import pytest

from localllm.tui.backend import ChatSettings, ReplyStats
from localllm.tui.context import ContextOverflow, fit_messages
from localllm.tui.export import code_blocks, export_conversation, slugify, to_markdown
from localllm.tui.keys import SECTIONS, help_markdown
from localllm.tui.status import StatusInfo, format_status
from localllm.tui.store import Message, Store, default_db_path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "chat.md"


def test_store_roundtrip(tmp_path):
    store = Store(tmp_path / "sub" / "c.db")
    a = store.create("First", system_prompt="Be brief.", model="m.gguf")
    b = store.create()
    store.add_message(a.id, Message("user", "hi"))
    mid = store.add_message(a.id, Message("assistant", "hello", stats={"ttft": 0.1}))
    store.add_message(a.id, Message("user", "more"))
    store.add_message(b.id, Message("user", "other"))
    assert [c.id for c in store.list()] == [b.id, a.id]  # most recently updated first
    store.rename(a.id, "Renamed")
    store.close()
    store = Store(tmp_path / "sub" / "c.db")
    conv = store.load(a.id)
    assert (conv.title, conv.system_prompt, conv.model) == ("Renamed", "Be brief.", "m.gguf")
    assert [(m.role, m.content) for m in conv.messages] == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "more"),
    ]
    assert conv.messages[1].stats == {"ttft": 0.1}
    store.delete_messages_from(a.id, mid)
    assert [m.content for m in store.load(a.id).messages] == ["hi"]
    assert store.list()[0].num_messages == 1
    store.delete(a.id)
    with pytest.raises(KeyError):
        store.load(a.id)
    assert [m.content for m in store.load(b.id).messages] == ["other"]
    store.set_setting("sampling", {"temperature": 0.2})
    assert store.get_setting("sampling") == {"temperature": 0.2}
    assert store.get_setting("nope", 5) == 5


def test_db_path_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LOCALLLM_CHAT_DB", str(tmp_path / "x.db"))
    assert default_db_path() == tmp_path / "x.db"
    monkeypatch.delenv("LOCALLLM_CHAT_DB")
    assert default_db_path().name == "chat.sqlite3" and "localllm" in str(default_db_path())


def test_export_markdown(tmp_path):
    store = Store(tmp_path / "c.db")
    conv = store.create("Sorting in Python!", system_prompt="You are a tutor.\n", model="q.gguf")
    store.add_message(conv.id, Message("user", "How do I sort?"))
    store.add_message(conv.id, Message("assistant", "Use `sorted`:\n\n```python\nsorted(x)\n```\n"))
    path = export_conversation(store.load(conv.id), tmp_path / "out")
    assert path == tmp_path / "out" / f"sorting-in-python-{conv.id}.md"
    assert path.read_text() == (
        "# Sorting in Python!\n\nModel: `q.gguf`\n\n## System\n\nYou are a tutor.\n\n"
        "## User\n\nHow do I sort?\n\n## Assistant\n\nUse `sorted`:\n\n```python\nsorted(x)\n```\n"
    )
    assert to_markdown(store.load(conv.id)) == path.read_text()
    assert slugify("!!!") == "chat"


def test_code_blocks():
    text = "x\n```py\na = 1\n```\n\n    indented\n\nand `inline`\n~~~\nb\n~~~\n"
    assert code_blocks(text) == ["a = 1\n", "indented\n", "b\n"]
    assert code_blocks("no code") == []


def _count(messages):  # one token per word, plus one per message
    return sum(len(m["content"].split()) + 1 for m in messages)


def test_fit_keeps_everything_that_fits():
    hist = [{"role": "user", "content": "a b"}, {"role": "assistant", "content": "c"}]
    f = fit_messages("sys", hist, _count, 100, 10)
    assert f.messages == [{"role": "system", "content": "sys"}, *hist]
    assert (f.dropped, f.prompt_tokens) == (0, 7)


def test_fit_drops_oldest_whole_turns_keeps_system():
    hist = []
    for i in range(5):
        hist += [
            {"role": "user", "content": f"q{i} " * 5},
            {"role": "assistant", "content": "a " * 5},
        ]
    hist.append({"role": "user", "content": "last"})
    # system 2 + each turn 12 + last 2 -> budget 30 keeps two turns + the last message
    f = fit_messages("sys", hist, _count, 40, 10)
    assert f.messages[0] == {"role": "system", "content": "sys"}
    assert f.messages[1]["content"].startswith("q3") and f.messages[-1]["content"] == "last"
    assert f.dropped == 6 and f.prompt_tokens == 28


def test_fit_refuses_when_last_message_cannot_fit():
    hist = [{"role": "user", "content": "w " * 50}]
    with pytest.raises(ContextOverflow, match="too long"):
        fit_messages("", hist, _count, 40, 10)
    with pytest.raises(ContextOverflow, match="max tokens"):
        fit_messages("", [{"role": "user", "content": "x"}], _count, 40, 40)


def test_fit_without_tokenizer_sends_everything():
    hist = [{"role": "user", "content": "w " * 5000}]
    f = fit_messages("", hist, None, None, 10)
    assert f.messages == hist and f.prompt_tokens is None


def test_status_line():
    info = StatusInfo(
        "m.gguf",
        "ready",
        2048,
        300,
        ReplyStats("stop", 100, 40, 64, 0.0123, 55.55, 20, 10),
        (12, 400),
    )
    assert format_status(info) == (
        "m.gguf │ ready │ ctx 300/2048 │ TTFT 12 ms │ 55.5 tok/s │ cache hit 64% │ spec 10/20 accepted │ "
        "KV 12/400 blocks (3%)"
    )
    assert format_status(StatusInfo()) == "no model │ ready │ ctx 0/?"


def test_settings_are_checked():
    with pytest.raises(Exception, match="temperature"):
        ChatSettings(temperature=-1)
    with pytest.raises(Exception, match="max_tokens"):
        ChatSettings(max_tokens=0)


def test_every_key_is_in_help_and_docs():
    docs, helptext = DOCS.read_text(), help_markdown()
    for _, keys in SECTIONS:
        for k in keys:
            assert f"| {k.label} |" in helptext
            row = f"| {k.label} | {k.description} |"
            assert row in docs, f"docs/chat.md lacks the row {row!r}"
