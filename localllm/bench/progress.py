"""The progress bar of a bench run (rich, on stderr); one line per finished measurement when
stderr is not a terminal (logs, CI)."""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class BenchProgress:
    def __init__(self, total: int, live: bool | None = None) -> None:
        self.console = Console(stderr=True)
        self.live = self.console.is_terminal if live is None else live
        self.total = total
        self.done = 0
        self.scenario = ""
        self._t0 = time.perf_counter()
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> BenchProgress:
        if self.live:
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("starting", total=self.total)
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def begin(self, scenario: str) -> None:
        """A scenario starts (it may first build an engine of its own)."""
        self.scenario = scenario
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=f"{scenario}: measuring")

    def advance(self, label: str) -> None:
        """One measurement finished."""
        self.done += 1
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=1, description=f"{self.scenario}: {label} done")
        else:
            elapsed = time.perf_counter() - self._t0
            print(f"bench [{self.done}/{self.total}] {label} ({elapsed:.0f} s)", file=sys.stderr)
