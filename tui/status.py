"""The status line: model, context used / size, last answer's TTFT and tok/s, prefix-cache
hit, speculative drafts accepted / verified, KV pool use."""

from __future__ import annotations

from dataclasses import dataclass

from localllm.tui.backend import ReplyStats

SEP = " │ "


@dataclass
class StatusInfo:
    model: str = ""
    state: str = "ready"  # "loading", "answering", "ready", "error" ...
    context_size: int | None = None
    context_used: int | None = 0  # tokens of the last prompt + answer (None: unknown)
    last: ReplyStats | None = None
    pool: tuple[int, int] | None = None  # (used KV blocks, total)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def format_status(s: StatusInfo) -> str:
    parts = [s.model or "no model", s.state]
    size = str(s.context_size) if s.context_size else "?"
    parts.append(f"ctx {s.context_used if s.context_used is not None else '–'}/{size}")
    r = s.last
    if r is not None:
        parts.append(f"TTFT {r.ttft * 1000:.0f} ms" if r.ttft is not None else "TTFT –")
        parts.append(f"{r.tokens_per_s:.1f} tok/s" if r.tokens_per_s else "– tok/s")
        hit = r.cached_tokens / r.prompt_tokens if r.prompt_tokens else 0.0
        parts.append(f"cache hit {_pct(hit)}")
        drafted, accepted = r.spec_drafted, r.spec_accepted
        parts.append(f"spec {accepted}/{drafted} accepted" if drafted else "spec –")
    if s.pool is not None:
        used, total = s.pool
        parts.append(f"KV {used}/{total} blocks ({_pct(used / total if total else 0.0)})")
    return SEP.join(parts)
