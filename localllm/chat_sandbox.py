"""The Jinja environment that renders model-supplied chat templates, with bounds on work.

A chat template comes from the model file: it may be broken or hostile. Rendering matches
Hugging Face `apply_chat_template` (an `ImmutableSandboxedEnvironment` with `trim_blocks`,
`lstrip_blocks`, `loopcontrols`, `raise_exception`, `strftime_now`, a `tojson` that does not
HTML-escape) and adds limits: `**`, `*`, `+` and `%` refuse results larger than the limits
before computing them (so `10**(10**10)` or `'x' * 10**12` fail at once, and constant folding
at compile time cannot run them), `range` is capped by the sandbox (100,000), and the output
stops at `max_output_chars`. Time, memory and recursion are bounded by the process that runs
this (`chat_worker`): this module is pure and imports neither torch nor the engine.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sized
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


@dataclass(frozen=True)
class RenderLimits:
    """Bounds on one render; the one place these defaults live."""

    timeout_s: float = 5.0  # wall clock, compile included
    max_output_chars: int = 16 << 20  # also bounds any one string or list a template builds
    max_int_bits: int = 1 << 16  # integers beyond this many bits are refused
    memory_bytes: int = 1 << 30  # address space the rendering process may add


class TemplateFailure(Exception):
    """A template could not be rendered; the message is one line for the user. `raised`: the
    template itself called `raise_exception` (its message is for the user as it is)."""

    def __init__(self, message: str, raised: bool = False) -> None:
        super().__init__(message)
        self.raised = raised


class _TemplateRaised(TemplateFailure):
    """What `raise_exception` raises inside a template."""


def _raise_exception(message: str) -> None:
    raise _TemplateRaised(str(message))


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """HF's `tojson`: plain `json.dumps`, no HTML escaping, non-ASCII kept."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class _GenerationTag(Extension):
    """Accepts HF's `{% generation %}...{% endgeneration %}` marker and renders its body."""

    tags = {"generation"}

    def parse(self, parser: Any) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


_FORMAT_WIDTH = re.compile(r"%[-#0 +]*(\d+)|\.(\d+)")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The HF-compatible sandbox, with sizes checked before an operator builds its result."""

    intercepted_binops = frozenset({"**", "*", "+", "%"})

    def __init__(self, limits: RenderLimits) -> None:
        super().__init__(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=["jinja2.ext.loopcontrols", _GenerationTag],
        )
        self.limits = limits
        self.filters["tojson"] = _tojson
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = _strftime_now

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_binop(self.limits, operator, left, right)
        return super().call_binop(context, operator, left, right)


def _int_bits(x: Any) -> int:
    return x.bit_length() if isinstance(x, int) and not isinstance(x, bool) else 0


def _check_binop(limits: RenderLimits, op: str, left: Any, right: Any) -> None:
    too_big = False
    if op == "**" and _int_bits(right) and right > 0 and isinstance(left, int):
        too_big = right * math.log2(abs(left) or 1) > limits.max_int_bits
    elif op == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, Sized) and not isinstance(seq, dict) and _int_bits(n):
                too_big = too_big or len(seq) * n > limits.max_output_chars
        too_big = too_big or _int_bits(left) + _int_bits(right) > limits.max_int_bits
    elif op == "+" and isinstance(left, Sized) and isinstance(right, Sized):
        too_big = len(left) + len(right) > limits.max_output_chars
    elif op == "%" and isinstance(left, str):
        widths = (int(a or b) for a, b in _FORMAT_WIDTH.findall(left))
        too_big = any(w > limits.max_output_chars for w in widths)
    if too_big:
        raise TemplateFailure(f"the result of {op!r} would be too large")


def compile_template(env: BoundedEnvironment, source: str) -> jinja2.Template:
    try:
        return env.from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateFailure(f"syntax error at line {e.lineno}: {one_line(e)}") from None
    except TemplateFailure:
        raise
    except (jinja2.TemplateError, RecursionError, MemoryError, ValueError, TypeError) as e:
        raise TemplateFailure(f"cannot be compiled: {type(e).__name__}: {one_line(e)}") from None


def render(template: jinja2.Template, limits: RenderLimits, context: dict[str, Any]) -> str:
    """Render with the output bounded; any failure is a one-line TemplateFailure."""
    parts: list[str] = []
    size = 0
    try:
        for chunk in template.generate(**context):
            size += len(chunk)
            if size > limits.max_output_chars:
                raise TemplateFailure(f"output is longer than {limits.max_output_chars} characters")
            parts.append(chunk)
    except _TemplateRaised as e:
        raise TemplateFailure(one_line(e), raised=True) from None
    except TemplateFailure:
        raise
    except RecursionError:
        raise TemplateFailure("recursion is too deep") from None
    except MemoryError:
        raise TemplateFailure("uses too much memory") from None
    except Exception as e:  # anything a template can raise: ZeroDivisionError, SecurityError...
        raise TemplateFailure(f"{type(e).__name__}: {one_line(e)}") from None
    return "".join(parts)


def one_line(e: BaseException) -> str:
    text = " ".join(str(getattr(e, "message", None) or e).split())
    return text[:300] or type(e).__name__
