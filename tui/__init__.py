"""The Textual chat (`localllm chat`): in-process engine, or a client of a remote server.

Module map: app (ChatApp: layout, start-up), base (ChatOptions, ChatBase: state, status
line, conversations on screen), actions (what the keys do), backend (LocalBackend over
AsyncEngine), remote (RemoteBackend over the openai client), context (fitting history into
the context window), store (SQLite conversations), export (Markdown), keys (every key),
screens/conversations (dialogs), widgets, status, serve (--serve). The model picker lists
what `localllm.hub.discovery` finds on disk. Nothing is imported here, so importing one
module stays light.
"""
