"""`localllm serve`: the OpenAI-compatible HTTP API (see docs/server.md)."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from localllm.cli.args import HelpFormatter, add_engine_args, engine_config, model_path
from localllm.cli.progress import stage_lines

if TYPE_CHECKING:
    from localllm.server.settings import ServerSettings

log = logging.getLogger("localllm.server")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve an OpenAI-compatible API (chat, completions, infill)",
        formatter_class=HelpFormatter,
    )
    add_engine_args(p)
    g = p.add_argument_group("server")
    g.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to bind (default: 127.0.0.1, this machine only)",
    )
    g.add_argument("--port", type=int, default=8000, help="TCP port (default: 8000)")
    g.add_argument(
        "--api-key",
        default=os.environ.get("LOCALLLM_API_KEY"),
        help="require 'Authorization: Bearer KEY' on every route but /health "
        "(default: $LOCALLLM_API_KEY, else no key)",
    )
    g.add_argument(
        "--served-model-name",
        default=None,
        help="model id clients use (default: the file name without .gguf)",
    )
    g.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allow browser requests from ORIGIN (repeatable; '*' for any)",
    )
    g.add_argument("--max-n", type=int, default=16, help="most choices (n) per request")
    g.add_argument(
        "--strict-model-name",
        action="store_true",
        help="answer 404 to a `model` other than the served name or the file name "
        "(default: any name is answered by the loaded model, as llama-server does)",
    )
    g.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also accept requests whose Host header is NAME (repeatable; '*' for any). "
        "Default: IP addresses, localhost and the --host name",
    )
    p.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> ServerSettings:
    from localllm.server.settings import ServerSettings

    path = Path(args.model)
    name = args.served_model_name or path.stem
    typed = getattr(args, "model_reference", args.model)  # owner/repo:QUANT as given
    aliases = tuple(dict.fromkeys(a for a in (path.name, path.stem, typed) if a != name))
    return ServerSettings(
        name,
        aliases,
        args.api_key,
        tuple(args.cors_origin),
        max_n=args.max_n,
        strict_model_name=args.strict_model_name,
        host=args.host,
        port=args.port,
        allowed_hosts=tuple(args.allowed_host),
        model_path=str(path),
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from localllm.engine.async_engine import AsyncEngine
    from localllm.errors import LocalLLMError
    from localllm.server import create_app

    settings_from_args(args)  # a bad option is one line before any download
    args = argparse.Namespace(**vars(args), model_reference=args.model)
    args.model = model_path(args.model)  # pulled now, before the server starts
    settings = settings_from_args(args)
    cfg = engine_config(args)
    if not Path(cfg.model).exists():  # a .gguf file or a model folder
        raise LocalLLMError(f"{cfg.model}: no such model file or folder")
    failure: list[BaseException] = []
    server: uvicorn.Server | None = None

    def on_load_error(e: BaseException) -> None:  # stop serving: nothing could ever answer
        failure.append(e)
        if server is not None:
            server.should_exit = True

    progress = stage_lines(args.verbose)
    app = create_app(settings, lambda: AsyncEngine.from_config(cfg, progress), on_load_error)
    if not settings.loopback and settings.api_key is None:
        log.warning("serving on %s without --api-key: anyone on the network can use it", args.host)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level="info" if args.verbose else "warning",
        )
    )
    print(
        f"localllm: serving {settings.model_name} on http://{args.host}:{args.port}/v1 "
        "(loading the model; /health says when it is ready)",
        flush=True,
    )
    server.run()
    if failure:
        err = failure[0]
        raise err if isinstance(err, LocalLLMError) else LocalLLMError(f"loading failed: {err}")
    return 0
