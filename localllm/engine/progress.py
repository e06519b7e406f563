"""Start-up progress: every load stage is logged (INFO, shown by `-v`) and handed to the front
end's callback (a spinner on the command line, the status line of the chat)."""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("localllm")

ProgressFn = Callable[[str], None]  # receives one short line per stage ("loading weights ...")


class LoadProgress:
    """Reports a stage to the log and to the optional callback."""

    def __init__(self, callback: ProgressFn | None = None) -> None:
        self.callback = callback

    def __call__(self, stage: str) -> None:
        log.info("%s", stage)
        if self.callback is not None:
            self.callback(stage)
