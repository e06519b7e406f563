"""Stop-string handling on streamed text: never emit part of a stop string.

Pure Python. `StopStringBuffer.feed(delta)` returns (text safe to emit, stopped?). Text that
could be the start of a stop string is held back until it is clearly not one.
"""

from __future__ import annotations


class StopStringBuffer:
    def __init__(self, stops: list[str]) -> None:
        self.stops = [s for s in stops if s]
        self.held = ""
        self.stopped = False

    def _holdback(self, text: str) -> int:
        """Length of the longest suffix of text that is a proper prefix of some stop string."""
        best = 0
        for s in self.stops:
            for n in range(min(len(s) - 1, len(text)), best, -1):
                if text.endswith(s[:n]):
                    best = n
                    break
        return best

    def feed(self, delta: str) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        if not self.stops:
            return delta, False
        text = self.held + delta
        hits = [i for i in (text.find(s) for s in self.stops) if i >= 0]
        if hits:
            self.stopped = True
            self.held = ""
            return text[: min(hits)], True
        keep = self._holdback(text)
        self.held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep], False

    def flush(self) -> str:
        """At the end of generation (not by a stop string) the held text is real output."""
        out, self.held = ("" if self.stopped else self.held), ""
        return out
