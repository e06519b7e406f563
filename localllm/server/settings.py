"""Server settings: what the HTTP front door needs besides the engine's own config."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSettings:
    model_name: str  # the id /v1/models lists and responses carry
    aliases: tuple[str, ...] = ()  # other names accepted in the `model` field (file name ...)
    api_key: str | None = None  # every route but /health then needs `Authorization: Bearer KEY`
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = 16 * 1024 * 1024  # larger request bodies get 413
    max_n: int = 16  # most choices one request may ask for

    def __post_init__(self) -> None:
        if not self.model_name:
            raise ValueError("--served-model-name must not be empty")
        if self.api_key is not None and not self.api_key:
            raise ValueError("--api-key must not be empty")
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be >= 1024")
        if self.max_n < 1:
            raise ValueError("max_n must be >= 1")

    def serves(self, name: str | None) -> bool:
        """Whether a request's `model` names this server's model (None: the default one)."""
        return name is None or name == self.model_name or name in self.aliases


@dataclass
class LoadStatus:
    """Where loading the engine stands: "loading" -> "ok" | "error"."""

    state: str = "loading"
    error: str | None = None
    seconds: float | None = None
