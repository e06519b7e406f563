"""Chat templates render in helper processes, so a runaway template cannot stall this one.

A template from a model file can loop for hours, recurse, or compute `10**(10**10)` in C
while holding the GIL; no thread can stop that. So each render goes to a small helper
process (`python -m localllm.chat_worker`, which imports only jinja2 and `chat_sandbox`):
one JSON line in (`source`, `context`, `limits`), one JSON line out (`text` or `error`). The
parent waits at most `limits.timeout_s`; past that the helper is killed and the render fails
with one line. The helper caps its own address space (`limits.memory_bytes` more than at
start), so an exploding template ends in MemoryError there, not in this process. Idle
helpers are reused (start-up ~0.1 s); one helper serves one render at a time.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from localllm.chat_sandbox import RenderLimits, TemplateFailure

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])
_MAX_IDLE = 4  # helpers kept for reuse


class _Helper:
    """One helper process and its pipes."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "localllm.chat_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            env=env,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, payload: bytes, deadline: float) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(payload)
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise EOFError
            buf += chunk
        return json.loads(buf)

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


class RenderPool:
    """Renders templates in helper processes, bounded in time; safe to call from threads."""

    def __init__(self) -> None:
        self._idle: list[_Helper] = []
        self._lock = threading.Lock()
        atexit.register(self.close)

    def render(self, source: str, context: dict[str, Any], limits: RenderLimits) -> str:
        """The rendered text, or TemplateFailure (one line) for any problem."""
        payload = json.dumps(
            {"source": source, "context": context, "limits": dataclasses.asdict(limits)},
            default=str,
        ).encode("utf-8", errors="surrogatepass")
        helper = self._take()
        try:
            reply = helper.request(payload + b"\n", time.monotonic() + limits.timeout_s)
        except TimeoutError:
            helper.kill()
            raise TemplateFailure(f"rendering took longer than {limits.timeout_s:g} s") from None
        except (EOFError, OSError, ValueError):
            code = helper.proc.poll()
            helper.kill()
            raise TemplateFailure(f"the template renderer stopped (exit code {code})") from None
        self._give_back(helper)
        if "error" in reply:
            raise TemplateFailure(str(reply["error"]), raised=bool(reply.get("raised")))
        return str(reply["text"])

    def _take(self) -> _Helper:
        with self._lock:
            while self._idle:
                helper = self._idle.pop()
                if helper.alive():
                    return helper
                helper.kill()
        return _Helper()

    def _give_back(self, helper: _Helper) -> None:
        with self._lock:
            if len(self._idle) < _MAX_IDLE:
                self._idle.append(helper)
                return
        helper.kill()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for helper in idle:
            helper.kill()


_POOL: RenderPool | None = None
_POOL_LOCK = threading.Lock()


def default_pool() -> RenderPool:
    """The process-wide pool (created on first use: no helper runs until a template does)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = RenderPool()
        return _POOL


# ---- the helper process --------------------------------------------------------------------


def _limit_memory(extra: int) -> None:
    import resource

    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    cap = pages * os.sysconf("SC_PAGE_SIZE") + extra
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _serve() -> None:
    from localllm import chat_sandbox as sb

    templates: dict[tuple[str, RenderLimits], Any] = {}
    limited = False
    for line in sys.stdin.buffer:
        req = json.loads(line)
        limits = RenderLimits(**req["limits"])
        if not limited and sys.platform.startswith("linux"):
            _limit_memory(limits.memory_bytes)
            limited = True
        try:
            key = (req["source"], limits)
            if key not in templates:
                templates.clear()  # one model's template at a time in practice
                templates[key] = sb.compile_template(sb.BoundedEnvironment(limits), req["source"])
            reply: dict[str, Any] = {"text": sb.render(templates[key], limits, req["context"])}
        except TemplateFailure as e:
            reply = {"error": str(e), "raised": e.raised}
        except MemoryError:
            reply = {"error": "uses too much memory"}
        except Exception as e:  # a bug here must still answer with one line
            reply = {"error": f"{type(e).__name__}: {sb.one_line(e)}"}
        out = json.dumps(reply, ensure_ascii=True).encode() + b"\n"
        sys.stdout.buffer.write(out)
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    _serve()
