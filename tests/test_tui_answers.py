"""The chat shows JSON answers indented and tool calls as blocks (the stored text unchanged)."""

from __future__ import annotations

import json

from test_tui_app import SIZE, options, wait_for

from localllm.tui.answer_view import answer_markdown
from localllm.tui.app import ChatApp
from localllm.tui.store import Message, Store
from localllm.tui.widgets import MessageView

JSON_ANSWER = '{"name": "Ada", "pets": [{"kind": "cat"}]}'
CALL_ANSWER = (
    "Let me look.\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}\n</tool_call>'
)


def test_answer_markdown() -> None:
    shown = answer_markdown(JSON_ANSWER)
    assert shown.startswith('```json\n{\n  "name": "Ada",')
    assert json.loads(shown.removeprefix("```json\n").removesuffix("\n```")) == json.loads(
        JSON_ANSWER
    )
    shown = answer_markdown(CALL_ANSWER)
    assert shown.startswith("Let me look.\n\n**Tool call** `get_weather`\n\n```json\n{\n")
    assert '"unit": "C"' in shown
    mistral = answer_markdown('[{"name": "now", "arguments": {}}]')  # a JSON list stays JSON
    assert mistral.startswith("```json")
    llama = answer_markdown('{"name": "now", "parameters": {}}')
    assert llama.startswith("```json")  # one JSON value: shown as such
    for plain in ("Once upon a time.", "a {b} [c]", "{not json"):
        assert answer_markdown(plain) == plain


async def test_stored_and_streamed_answers_are_shown_readably(tmp_path, stories_path) -> None:
    store = Store(tmp_path / "chat.db")
    conv = store.create("tools")
    for role, text in (
        ("user", "json?"),
        ("assistant", JSON_ANSWER),
        ("user", "weather?"),
        ("assistant", CALL_ANSWER),
    ):
        store.add_message(conv.id, Message(role, text))
    store.close()
    app = ChatApp(options(tmp_path, model=str(stories_path)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(app.query(MessageView)) == 4)
        shown = [v.body.source for v in app.query(MessageView)]
        assert shown[1] == answer_markdown(JSON_ANSWER) and shown[3] == answer_markdown(CALL_ANSWER)
        assert [v.content for v in app.query(MessageView)][1] == JSON_ANSWER  # stored as written
        view = MessageView("assistant")
        await app.query_one("#chat").mount(view)
        for piece in ('{"a": ', "[1, 2]", "}"):
            await view.append(piece)
        await view.finish()
        await pilot.pause()
        assert view.body.source == '```json\n{\n  "a": [\n    1,\n    2\n  ]\n}\n```'
        assert view.content == '{"a": [1, 2]}'
