"""Prompt-only jobs that outlive their HTTP request: they fill the prefix cache.

llama.vscode sends `n_predict: 0` to have its context processed ahead of the next completion;
a prompt phase cut by `t_max_prompt_ms` continues the same way. Each job asks the engine for
one greedy token (the prompt's last position is computed either way) and drops it; the
computed blocks stay in the prefix cache. At most `max_jobs` run at once: a new one cancels
the oldest, whose context is the stalest (the engine frees its blocks at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from localllm.core import SamplingParams
from localllm.engine.async_engine import AsyncEngine
from localllm.server.responses import new_id

log = logging.getLogger("localllm.server")
MAX_DETACHED = 2


class PromptWarmer:
    def __init__(self, max_jobs: int = MAX_DETACHED) -> None:
        self.max_jobs = max_jobs
        self._jobs: deque[asyncio.Task[None]] = deque()

    def start(self, engine: AsyncEngine, prompt_ids: list[int]) -> asyncio.Task[None]:
        """Process prompt_ids into the prefix cache in the background; the task ends when it
        is cached (or cancelled)."""
        while len(self._jobs) >= self.max_jobs:
            self._jobs.popleft().cancel()
        task = asyncio.create_task(self._run(engine, prompt_ids))
        self._jobs.append(task)
        task.add_done_callback(self._forget)
        return task

    @staticmethod
    async def _run(engine: AsyncEngine, prompt_ids: list[int]) -> None:
        params = SamplingParams(max_tokens=1, temperature=0.0)
        try:
            async for ev in engine.generate(prompt_ids, params, new_id("warm")):
                if ev.finished:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - nobody waits for this job's answer
            log.warning("caching a prompt failed: %s", e)

    def _forget(self, task: asyncio.Task[None]) -> None:
        with contextlib.suppress(ValueError):
            self._jobs.remove(task)

    @property
    def running(self) -> int:
        return len(self._jobs)

    def close(self) -> None:
        for task in list(self._jobs):
            task.cancel()
