"""Errors that reach the user as one clear line (the CLI exits 2, the server answers 4xx)."""

from __future__ import annotations


class LocalLLMError(Exception):
    """Base for errors caused by the user's input rather than a bug."""


class ModelLoadError(LocalLLMError):
    """A model file is missing, unreadable, corrupt or unsupported."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class HubError(LocalLLMError):
    """A model reference cannot be resolved, downloaded or removed (network, Hub, cache)."""


class RequestError(LocalLLMError):
    """A request cannot be served (bad parameters, prompt too long ...)."""

    def __init__(
        self, message: str, *, code: str = "invalid_request", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


class OutOfMemoryError(LocalLLMError):
    """The model or the requested context does not fit on the device."""
