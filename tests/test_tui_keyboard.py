"""Pilot tests of the chat's keyboard paths and status line with stories260K on CPU: the
settings panel by keyboard only, the status bar after Esc, the loading stages, the hints."""

from __future__ import annotations

from test_tui_app import SIZE, options, send, slow_down, views, wait_for

from localllm.tui.app import ChatApp
from localllm.tui.backend import ChatSettings
from localllm.tui.widgets import Notice


def _status(app: ChatApp) -> str:
    return str(app.query_one("#status").render())


async def test_tab_leaves_the_system_prompt_and_settings_change_by_keyboard(tmp_path, stories_path):
    app = ChatApp(options(tmp_path, model=str(stories_path)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.backend is not None)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "system-prompt"
        await pilot.press(*"Be brief.")
        await pilot.press("tab")
        assert app.focused.id == "temperature"
        await pilot.press("tab")
        assert app.focused.id == "top-p"
        await pilot.press("tab")
        assert app.focused.id == "max-tokens"
        await pilot.press("shift+tab", "shift+tab")
        assert app.focused.id == "temperature"
        await pilot.press("end", *["backspace"] * 8, "0", ".", "5")  # was "0.0"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.settings == ChatSettings(temperature=0.5, top_p=1.0, max_tokens=24)
        assert app.conv.system_prompt == "Be brief."
        assert app.store.get_setting("sampling")["temperature"] == 0.5


async def test_escape_clears_the_previous_answers_figures(tmp_path, stories_path):
    app = ChatApp(
        options(
            tmp_path, model=str(stories_path), settings=ChatSettings(temperature=0, max_tokens=8)
        )
    )
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "Hello")
        assert "TTFT" in _status(app) and "tok/s" in _status(app)
        app.settings = ChatSettings(temperature=0.0, max_tokens=1500)
        restore = slow_down(app.backend.engine.engine)
        app.query_one("#input").text = "Once upon a time"
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(views(app)) == 4 and views(app)[3][1])
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.busy)
        await pilot.pause()
        status = _status(app)
        assert "ready" in status and "TTFT" not in status and "tok/s" not in status, status
        assert "ctx –/" in status  # the stopped answer's context use is unknown, not stale
        restore()
        app.settings = ChatSettings(temperature=0.0, max_tokens=8)
        await send(pilot, app, "Again")  # the next full answer shows its own figures
        assert "TTFT" in _status(app)


async def test_loading_shows_each_stage(tmp_path, stories_path, monkeypatch):
    states: list[str] = []
    real = ChatApp.set_state

    def spy(self, state):
        states.append(state)
        real(self, state)

    monkeypatch.setattr(ChatApp, "set_state", spy)
    app = ChatApp(options(tmp_path, model=str(stories_path)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.backend is not None)
        await pilot.pause()
    assert states[0] == "loading stories260K.gguf"
    assert any(s.startswith("loading weights") for s in states), states
    assert any("KV cache" in s for s in states) and states[-1] == "ready"
    assert not any("CUDA graphs" in s for s in states)  # none on CPU


async def test_model_without_template_names_its_fallback(tmp_path, stories_path):
    app = ChatApp(options(tmp_path, model=str(stories_path)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.query(Notice))
        text = str(app.query_one(Notice).render())
        assert text == (
            "stories260K.gguf has no chat template: using the built-in llama-2 template."
        )
