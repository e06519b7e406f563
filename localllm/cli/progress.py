"""What the command line shows while a model loads: a spinner on stderr with the current stage
and the time so far (a terminal only; `-v` logs the same stages as lines instead)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from localllm.engine.progress import ProgressFn


def _console() -> Console | None:
    """The stderr console when it is a terminal, else None."""
    console = Console(stderr=True)
    return console if console.is_terminal else None


@contextmanager
def load_spinner(verbose: int) -> Iterator[ProgressFn | None]:
    """A transient spinner while the body runs (leaves no line behind); yields the callback
    that sets its text, or None where nothing is shown (not a terminal, or `-v`)."""
    console = None if verbose else _console()
    if console is None:
        yield None
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, redirect_stdout=False) as bar:
        task = bar.add_task("starting", total=None)

        def update(stage: str) -> None:
            bar.update(task, description=stage)
            bar.refresh()

        yield update


def stage_lines(verbose: int) -> ProgressFn | None:
    """For a long-running command (serve): one stderr line per stage on a terminal."""
    if verbose or _console() is None:
        return None
    return lambda stage: print(f"localllm: {stage}", file=sys.stderr, flush=True)
