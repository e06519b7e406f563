"""Pilot tests of the chat app with stories260K on CPU (App.run_test)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localllm.config import EngineConfig
from localllm.tui.app import ChatApp, ChatOptions
from localllm.tui.backend import ChatSettings, LocalBackend
from localllm.tui.export import to_markdown
from localllm.tui.store import Store
from localllm.tui.widgets import MessageView, Notice

SIZE = (100, 32)


def cpu_config(path: str) -> EngineConfig:
    return EngineConfig(model=path, device="cpu", num_kv_blocks=256)


def options(tmp_path: Path, **kw: object) -> ChatOptions:
    base = dict(
        engine_config=cpu_config,
        db_path=tmp_path / "chat.db",
        export_dir=tmp_path / "out",
        settings=ChatSettings(temperature=0.0, top_p=1.0, max_tokens=24),
    )
    base.update(kw)
    return ChatOptions(**base)  # type: ignore[arg-type]


async def wait_for(pilot, cond: Callable[[], object], timeout: float = 20.0) -> None:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("timed out waiting for the UI")
        await pilot.pause(0.05)


async def send(pilot, app: ChatApp, text: str) -> None:
    await wait_for(pilot, lambda: app.backend is not None)
    app.query_one("#input").text = text
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.reply_worker is not None)
    await wait_for(pilot, lambda: not app.busy)
    await pilot.pause()


def views(app: ChatApp) -> list[tuple[str, str]]:
    return [(v.role, v.content) for v in app.query(MessageView)]


def notices(app: ChatApp) -> list[str]:
    return [str(n.render()) for n in app.query(Notice)]


def expected_answer(backend: LocalBackend, messages: list[dict], max_tokens: int) -> str:
    """The greedy answer straight from the engine (same prompt the app builds)."""
    from localllm.core import SamplingParams

    ids = backend.prompt_ids(messages)

    def run(e):  # on the engine thread, through the same detokenizer path as the app
        rid = e.add_request(
            ids, SamplingParams(max_tokens=max_tokens, temperature=0.0), continuation=False
        )
        text = ""
        while e.has_work():
            text += "".join(ev.text for ev in e.step() if ev.request_id == rid)
        return text

    return backend.engine.run_sync(run)


async def test_send_streams_answer(tmp_path, stories_path, monkeypatch):
    calls: list[str] = []
    orig = MessageView.append

    async def spy(self, text):
        calls.append(text)
        await orig(self, text)

    monkeypatch.setattr(MessageView, "append", spy)
    app = ChatApp(options(tmp_path, model=str(stories_path)))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "Tell me a story about a cat")
        (r1, q), (r2, answer) = views(app)
        assert (r1, q) == ("user", "Tell me a story about a cat")
        assert r2 == "assistant" and answer
        assert len([c for c in calls if c]) > 1  # streamed in pieces, not set at the end
        want = expected_answer(app.backend, [{"role": "user", "content": q}], 24)
        assert answer == want
        status = str(app.query_one("#status").render())
        assert "stories260K.gguf" in status and "/2048" in status and "tok/s" in status
        assert "KV " in status and "TTFT" in status
        md = app.query_one(MessageView).body
        assert md.source == q
    conv = Store(tmp_path / "chat.db").load(1)
    assert [m.content for m in conv.messages] == [q, answer]
    assert conv.title == q


async def test_escape_stops_and_frees_blocks(tmp_path, stories_path):
    app = ChatApp(
        options(
            tmp_path,
            model=str(stories_path),
            settings=ChatSettings(temperature=0.0, max_tokens=1500),
        )
    )
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.backend is not None)
        engine = app.backend.engine
        slow_down(engine.engine)
        app.query_one("#input").text = "Once upon a time"
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(views(app)) == 2 and views(app)[1][1])
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.busy)
        await pilot.pause()
        left = engine.run_sync(
            lambda e: (len(e.requests), e.has_work(), e.block_manager.num_used_blocks)
        )
        assert left == (0, False, 0)
        view = list(app.query(MessageView))[-1]
        assert view.border_subtitle == "stopped"
        saved = app.store.load(app.conv.id).messages[-1]
        assert saved.role == "assistant" and saved.stats == {"finish_reason": "abort"}
        assert 0 < len(engine.tokenizer.encode(saved.content, add_special=False)) < 1000
        assert app.info.state == "ready"


async def test_regenerate_and_edit(tmp_path, stories_path):
    app = ChatApp(options(tmp_path, model=str(stories_path)))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "Hello")
        first_id = app.conv.messages[-1].id
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.conv.messages[-1].id != first_id and not app.busy)
        await pilot.pause()
        assert [r for r, _ in views(app)] == ["user", "assistant"]
        assert len(app.store.load(app.conv.id).messages) == 2
        await pilot.press("ctrl+e")
        assert app.query_one("#input").text == "Hello"
        app.query_one("#input").text = "Tell me about a dog"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.busy and len(app.conv.messages) == 2)
        await pilot.pause()
        stored = app.store.load(app.conv.id).messages
        assert [m.role for m in stored] == ["user", "assistant"]
        assert stored[0].content == "Tell me about a dog"
        assert views(app)[0] == ("user", "Tell me about a dog") and len(views(app)) == 2


async def test_conversations_persist_across_restart(tmp_path, stories_path):
    app = ChatApp(options(tmp_path, model=str(stories_path)))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "First topic")
        first = views(app)
        await pilot.press("ctrl+n")
        await send(pilot, app, "Second topic")
    app2 = ChatApp(options(tmp_path, model=str(stories_path)))
    async with app2.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert views(app2)[0] == ("user", "Second topic")  # the latest is reopened
        await pilot.press("ctrl+o")
        await pilot.pause()
        ol = app2.screen.query_one("#conversation-list")
        labels = [str(ol.get_option_at_index(i).prompt) for i in range(ol.option_count)]
        assert labels[0].startswith("Second topic") and labels[1].startswith("First topic")
        await pilot.press("down", "enter")
        await pilot.pause()
        assert views(app2) == first
        assert app2.sub_title == "First topic"


async def test_rename_delete_export(tmp_path, stories_path):
    app = ChatApp(options(tmp_path, model=str(stories_path)))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "Write `code`")
        await pilot.press("ctrl+o")
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        app.screen.query_one("#title").value = "My chat"
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        out = tmp_path / "out" / f"my-chat-{app.conv.id}.md"
        answer = app.conv.messages[1].content.strip()
        assert out.read_text() == (
            "# My chat\n\n## User\n\nWrite `code`\n\n## Assistant\n\n" + answer + "\n"
        )
        assert out.read_text() == to_markdown(app.store.load(app.conv.id))
        await pilot.press("d", "d")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert [c.id for c in app.store.list()] == [app.conv.id] and app.conv.id != 1
        assert views(app) == []  # the open conversation was deleted: a new one replaced it


async def test_settings_panel_and_help(tmp_path, stories_path):
    app = ChatApp(options(tmp_path, model=str(stories_path)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.backend is not None)
        await pilot.press("f1")
        await pilot.pause()
        text = app.screen.query_one("Markdown").source
        assert "Ctrl+R" in text and "Esc" in text and "Ctrl+J" in text
        await pilot.press("escape")
        await pilot.press("ctrl+s")
        await pilot.pause()
        app.screen.query_one("#system-prompt").text = "You are terse."
        app.screen.query_one("#temperature").value = "7000"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "temperature" in str(app.screen.query_one("#settings-error").render())
        app.screen.query_one("#temperature").value = "0.3"
        app.screen.query_one("#max-tokens").value = "100"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.settings == ChatSettings(temperature=0.3, top_p=1.0, max_tokens=100)
        assert app.store.load(app.conv.id).system_prompt == "You are terse."
        assert app.store.get_setting("sampling")["max_tokens"] == 100


async def test_context_overflow_is_visible(tmp_path, stories_path):
    small = lambda p: EngineConfig(model=p, device="cpu", max_model_len=96, num_kv_blocks=64)
    app = ChatApp(
        options(
            tmp_path,
            model=str(stories_path),
            engine_config=small,
            settings=ChatSettings(temperature=0.0, max_tokens=16),
        )
    )
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "a " * 200)
        assert any("too long" in n for n in notices(app))
        assert [r for r, _ in views(app)] == ["user"]  # refused: no answer
        await pilot.press("ctrl+n")
        for word in ("One", "Two", "Three", "Four", "Five"):
            await send(pilot, app, f"{word} little bird sat on the tree")
        assert any("oldest messages were left out" in n for n in notices(app))
        assert views(app)[-1][0] == "assistant" and views(app)[-1][1]


async def test_copy_answer_and_code(tmp_path, stories_path, monkeypatch):
    app = ChatApp(options(tmp_path, model=str(stories_path)))
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "Hi")
        await pilot.press("ctrl+t")
        assert copied == [app.conv.messages[-1].content]
        app.conv.messages[-1].content = "a\n```py\nx = 1\n```\nb\n```\ny = 2\n```\n"
        await pilot.press("ctrl+b", "ctrl+b")
        assert copied[1:] == ["y = 2\n", "x = 1\n"]


async def test_model_picker_lists_models_dir(tmp_path, stories_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in (
        "HF_HOME",
        "HF_HUB_CACHE",
        "LLAMA_CACHE",
        "OLLAMA_MODELS",
        "XDG_CACHE_HOME",
        "LOCALLLM_MODELS",
    ):
        monkeypatch.delenv(var, raising=False)
    models = tmp_path / "models"
    (models / "sub").mkdir(parents=True)
    (models / "sub" / "stories.gguf").symlink_to(stories_path)
    (models / "fake.gguf").write_bytes(b"NOPE" + bytes(64))
    (models / "readme.txt").write_text("not a model")
    app = ChatApp(options(tmp_path, models_dirs=(str(models),)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.screen.query("#models"))
        ol = app.screen.query_one("#models")
        labels = [str(ol.get_option_at_index(i).prompt) for i in range(ol.option_count)]
        assert len(labels) == 1 and labels[0].startswith("sub/stories.gguf")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.backend is not None)
        assert app.info.model == "stories.gguf"


async def test_picker_without_models_explains(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in (
        "HF_HOME",
        "HF_HUB_CACHE",
        "LLAMA_CACHE",
        "OLLAMA_MODELS",
        "XDG_CACHE_HOME",
        "LOCALLLM_MODELS",
    ):
        monkeypatch.delenv(var, raising=False)
    app = ChatApp(options(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.screen.query("#no-models"))
        hint = str(app.screen.query_one("#no-models").render())
        assert "localllm pull" in hint and "hf download" in hint and "huggingface-cli" not in hint
        await pilot.press("escape")
        await pilot.pause()
    assert app.return_code == 0


async def test_bad_model_file_shows_error(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"this is not a model")
    app = ChatApp(options(tmp_path, model=str(bad)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: notices(app))
        (msg,) = notices(app)
        assert "Could not load the model" in msg and "not a GGUF file" in msg
        assert "Traceback" not in msg and app.info.state == "error"
        app.query_one("#input").text = "hello?"
        await pilot.press("enter")  # no crash, no request
        await pilot.pause()
        assert views(app) == [] and app.is_running


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_dead_url_shows_error(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}"
    app = ChatApp(options(tmp_path, url=url))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: notices(app))
        (msg,) = notices(app)
        assert "Could not connect" in msg and "cannot reach the server" in msg and url in msg
        assert "Traceback" not in msg


# longer than the largest KV block (64 tokens), so that its prompt's first block is cached
STORY = (
    "Tell me a story about a cat named Tom who lived in a small house near the big park with "
    "his friend Lily, a little girl who liked to play with her red ball every day"
)


async def test_serve_shares_the_engine(tmp_path, stories_path):
    import httpx

    app = ChatApp(options(tmp_path, model=str(stories_path), serve=True, port=0))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.server is not None and app.server.started)
        async with httpx.AsyncClient(base_url=app.serving_url, timeout=30) as client:
            models = (await client.get("/models")).json()
            assert models["data"][0]["id"] == "stories260K.gguf"
            body = {
                "model": "stories260K.gguf",
                "max_tokens": 24,
                "temperature": 0,
                "messages": [{"role": "user", "content": STORY}],
            }
            resp = (await client.post("/chat/completions", json=body)).json()
        await send(pilot, app, STORY)
        # one engine: the chat's answer equals the API's, and the API's prompt was cached
        assert views(app)[1][1] == resp["choices"][0]["message"]["content"]
        assert app.info.last.cached_tokens > 0


async def test_serve_on_a_busy_port_is_explained(tmp_path, stories_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        app = ChatApp(options(tmp_path, model=str(stories_path), serve=True, port=port))
        async with app.run_test(size=SIZE) as pilot:
            want = f"Not serving: cannot listen on 127.0.0.1:{port}"
            await wait_for(pilot, lambda: any(want in n for n in notices(app)))
            await send(pilot, app, "Hi")  # the chat itself still works
            assert views(app)[1][1]


async def test_url_mode_chats_with_a_server(tmp_path, stories_path):
    from localllm.server.background import model_server

    server = model_server(stories_path, device="cpu", num_kv_blocks=128)
    try:
        app = ChatApp(options(tmp_path, url=server.url))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.backend is not None, timeout=30)
            assert app.info.model == "stories260K"
            await send(pilot, app, "Tell me a story about a cat")
            (_, q), (role, answer) = views(app)
            assert role == "assistant" and answer and not notices(app)
            assert app.info.last.completion_tokens > 0 and app.info.last.tokens_per_s
    finally:
        server.stop()


def slow_down(engine: Any) -> Callable[[], None]:
    """A slower "model" (10 ms more per step), so Esc lands mid-answer; returns the undo."""
    real_step = engine.step

    def slow_step() -> Any:
        time.sleep(0.01)
        return real_step()

    def restore() -> None:
        engine.step = real_step

    engine.step = slow_step
    return restore
