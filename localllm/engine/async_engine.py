"""AsyncEngine: the LLMEngine loop in one background thread, asyncio streams in front.

`generate()` is an async iterator of TokenEvents; leaving it early (a client disconnects, the
user presses Esc) aborts the request in the engine, which frees its KV blocks at once.
Bad requests raise before anything is queued; an exception inside a step fails the requests
in flight with an error event and the loop keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import traceback
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

from localllm.config import EngineConfig
from localllm.core import SamplingParams, TokenEvent
from localllm.engine.engine import LLMEngine
from localllm.engine.progress import ProgressFn

log = logging.getLogger("localllm")


class AsyncEngine:
    def __init__(self, engine: LLMEngine) -> None:
        self.engine = engine
        self.tokenizer = engine.tokenizer
        self.chat_template = engine.chat_template
        self.model_cfg = engine.model_cfg
        self.max_model_len = engine.max_model_len
        self._commands: queue.Queue[Callable[[], None]] = queue.Queue()
        self._streams: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue[TokenEvent]]] = {}
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="localllm-engine", daemon=True)
        self._thread.start()

    @classmethod
    def from_config(cls, cfg: EngineConfig, progress: ProgressFn | None = None) -> AsyncEngine:
        return cls(LLMEngine(cfg, progress))

    # ---- engine thread ------------------------------------------------------------------
    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run fn on the engine thread and wait for its result (re-raising its exception)."""
        done = threading.Event()
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                box["error"] = e
            done.set()

        self._commands.put(run)
        self._wake.set()
        done.wait()
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def _loop(self) -> None:
        while not self._stop:
            while True:
                try:
                    self._commands.get_nowait()()
                except queue.Empty:
                    break
            if not self.engine.has_work():
                self._wake.wait(timeout=0.5)
                self._wake.clear()
                continue
            try:
                events = self.engine.step()
            except Exception as e:  # never take the process down: fail what was in flight
                log.error("engine step failed: %s\n%s", e, traceback.format_exc())
                events = self._fail_all(f"internal error: {e}")
            for ev in events:
                self._deliver(ev)

    def _fail_all(self, message: str) -> list[TokenEvent]:
        events = []
        for rid in list(self.engine.requests):
            ev = self.engine.abort(rid)
            if ev is not None:
                ev.finish_reason, ev.error = "error", message
                events.append(ev)
        return events

    def _deliver(self, ev: TokenEvent) -> None:
        target = self._streams.get(ev.request_id)
        if target is None:
            return
        loop, q = target
        if ev.finished:
            self._streams.pop(ev.request_id, None)
        try:
            loop.call_soon_threadsafe(q.put_nowait, ev)
        except RuntimeError:  # the client's loop is closed
            pass

    # ---- public API (any thread / event loop) --------------------------------------------
    async def generate(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        request_id: str | None = None,
        continuation: bool = True,
    ) -> AsyncGenerator[TokenEvent, None]:
        rid = request_id or uuid.uuid4().hex
        q: asyncio.Queue[TokenEvent] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._streams[rid] = (loop, q)

        def add() -> None:
            self.engine.add_request(prompt_ids, params, rid, continuation)

        try:
            await loop.run_in_executor(None, self._call, add)
        except asyncio.CancelledError:
            # the add may already be queued on the engine thread: abort after it (commands run
            # in order), or the request would run on with nobody reading it
            self.abort(rid)
            raise
        except BaseException:
            self._streams.pop(rid, None)
            raise
        finished = False
        try:
            while True:
                ev = await q.get()
                finished = ev.finished
                yield ev
                if finished:
                    return
        finally:
            if not finished:
                self.abort(rid)

    def abort(self, request_id: str) -> None:
        """Stop a request now and free its blocks (no event is delivered for it)."""
        self._streams.pop(request_id, None)

        def run() -> None:
            self.engine.abort(request_id)

        self._commands.put(run)
        self._wake.set()

    def run_sync(self, fn: Callable[[LLMEngine], Any]) -> Any:
        """Run fn(engine) on the engine thread (stats, cache queries) and return its result."""
        return self._call(lambda: fn(self.engine))

    def shutdown(self, close_engine: bool = True) -> None:
        """Stop the engine thread and close the engine (close_engine=False hands the engine
        back to the caller, e.g. bench, which goes on stepping it directly)."""
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=10)
        if close_engine and not self._thread.is_alive():  # never free memory under a running step
            self.engine.close()
