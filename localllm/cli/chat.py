"""`localllm chat`: the Textual terminal chat (see docs/chat.md)."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from localllm.cli.args import HelpFormatter, add_engine_args, engine_config, model_path
from localllm.sampling_defaults import CHAT


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chat",
        help="chat with a model in the terminal",
        description="Terminal chat. Without --model or --url, pick one of the "
        "GGUF files found on this machine.",
        formatter_class=HelpFormatter,
    )
    add_engine_args(p, model_required=False)
    g = p.add_argument_group("chat")
    g.add_argument(
        "--url",
        help="chat with a running OpenAI-compatible server instead, e.g. "
        "http://127.0.0.1:8000 (default: none, the model runs in this process)",
    )
    g.add_argument("--remote-model", help="model name to ask the server for (default: its first)")
    g.add_argument("--api-key", default=None, help="API key for --url (default: none)")
    g.add_argument(
        "--serve",
        action="store_true",
        help="also serve the OpenAI API from this process and engine",
    )
    g.add_argument("--host", default="127.0.0.1", help="--serve address (default: 127.0.0.1)")
    g.add_argument("--port", type=int, default=8000, help="--serve port (default: 8000)")
    g.add_argument(
        "--models-dir",
        action="append",
        default=[],
        help="extra folder to search for .gguf files (repeatable)",
    )
    g.add_argument(
        "--db",
        type=Path,
        default=None,
        help="conversation database (default: $LOCALLLM_CHAT_DB or the user data dir)",
    )
    g.add_argument(
        "--export-dir",
        type=Path,
        default=Path("."),
        help="where exported Markdown goes (default: the current folder)",
    )
    _add_sampling_args(g)
    p.set_defaults(func=run)


def _add_sampling_args(g: argparse._ArgumentGroup) -> None:
    """System prompt and sampling settings of the chat (they override the saved ones)."""
    g.add_argument(
        "--system",
        default=None,
        help="system prompt for new conversations (default: the one last saved in the "
        "settings panel, else none)",
    )
    saved = " (default: the chat's saved settings, else {})"
    g.add_argument(
        "--temperature",
        "-t",
        type=float,
        default=None,
        help="sampling temperature, 0 = greedy" + saved.format(CHAT.temperature),
    )
    g.add_argument(
        "--top-p", type=float, default=None, help="nucleus sampling mass" + saved.format(CHAT.top_p)
    )
    g.add_argument(
        "--max-tokens",
        "-n",
        type=int,
        default=None,
        help="most tokens per answer" + saved.format(CHAT.max_tokens),
    )


def _settings(args: argparse.Namespace):
    from localllm.tui.backend import ChatSettings

    given = {k: getattr(args, k) for k in ("temperature", "top_p", "max_tokens")}
    given = {k: v for k, v in given.items() if v is not None}
    return ChatSettings(**given) if given else None


def _config_for(args: argparse.Namespace, path: str):
    """The engine config for the model picked at start-up (or given with --model)."""
    return engine_config(argparse.Namespace(**{**vars(args), "model": path}))


def run(args: argparse.Namespace) -> int:
    from localllm.errors import LocalLLMError
    from localllm.tui.app import ChatApp, ChatOptions

    if args.url and args.model:
        raise LocalLLMError("use either --model (in-process) or --url (remote server), not both")
    if args.serve and args.url:
        raise LocalLLMError("--serve shares an in-process engine; it does not work with --url")
    # a Hub reference is pulled here, before the terminal UI takes the screen
    model = model_path(args.model, tuple(args.models_dir)) if args.model else None
    opts = ChatOptions(
        model=model,
        url=args.url,
        remote_model=args.remote_model,
        api_key=args.api_key,
        engine_config=functools.partial(_config_for, args),
        models_dirs=tuple(args.models_dir),
        db_path=args.db,
        export_dir=args.export_dir,
        serve=args.serve,
        host=args.host,
        port=args.port,
        settings=_settings(args),
        system_prompt=args.system,
    )
    ChatApp(opts).run()
    return 0
