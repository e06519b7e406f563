"""Engine options shared by every subcommand that loads a model, built from EngineConfig's
fields (config.option): each default, choice list and help text lives once, in config.py."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any

from localllm.config import EngineConfig
from localllm.errors import LocalLLMError


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default: its value, "off" for a flag, "none" for an
    empty list (an option whose default is None states it in its help text)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if "default:" in text or default is None or default == argparse.SUPPRESS:
            return text
        if not action.option_strings or isinstance(action, argparse._VersionAction):
            return text
        if isinstance(action, argparse._StoreConstAction):  # store_true
            shown: object = "off"
        else:
            shown = default if default not in ([], "") else "none"
        return f"{text} (default: {shown})".lstrip()


def _value_type(f: dataclasses.Field[Any]) -> type:
    """int for `int | None`, float for `float`, ... (the field's non-None type)."""
    hint = typing.get_type_hints(EngineConfig)[f.name]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def _help(f: dataclasses.Field[Any]) -> str:
    meta = f.metadata
    shown = meta["shown"] if meta["shown"] is not None else f.default
    return f"{meta['help']} (default: {shown})"


def _add(g: argparse._ArgumentGroup, f: dataclasses.Field, model_required: bool) -> None:
    meta = f.metadata
    names = [meta["flag"]] + ([meta["short"]] if meta["short"] else [])
    kw: dict[str, Any] = {"dest": f.name}
    if f.name == "model":
        shown = "" if model_required else " (default: pick one of the GGUF files found here)"
        kw.update(required=model_required, help=meta["help"] + shown)
    elif meta["negate"]:
        kw.update(action="store_false", help=_help(f))
    else:
        kw.update(type=_value_type(f), choices=meta["choices"], help=_help(f))
    g.add_argument(*names, default=f.default if f.name != "model" else None, **kw)


def add_engine_args(
    p: argparse.ArgumentParser, model_required: bool = True, only: tuple[str, ...] = ()
) -> None:
    """One option per EngineConfig field that has a flag (or just the fields named in
    `only`); args.<field> holds its value."""
    g = p.add_argument_group("engine")
    for f in dataclasses.fields(EngineConfig):
        if f.metadata.get("flag") and (not only or f.name in only):
            _add(g, f, model_required)


def model_path(ref: str, models_dirs: tuple[str, ...] = ()) -> str:
    """--model as a local path: a path, a `localllm list` name or owner/repo[:QUANT]
    (pulled on first use, with huggingface_hub's progress bars on stderr)."""
    from localllm.hub.resolve import resolve_model

    return str(resolve_model(ref, models_dirs=models_dirs))


def engine_config(args: argparse.Namespace, **overrides: object) -> EngineConfig:
    """The EngineConfig of parsed engine options (plus overrides), its model resolved to a
    local path; a bad value is a one-line error."""
    kw = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(EngineConfig)
        if f.metadata.get("flag") and hasattr(args, f.name)
    }
    kw.update(overrides)
    try:
        cfg = EngineConfig(**kw)
    except ValueError as e:
        raise LocalLLMError(str(e)) from None
    # the options are checked first; then --model becomes a local path (maybe pulled now)
    return dataclasses.replace(cfg, model=model_path(cfg.model))
