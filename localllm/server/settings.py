"""Server settings: what the HTTP front door needs besides the engine's own config.

Every check lives in `ServerSettings.__post_init__` and raises `LocalLLMError`, so a bad
option (`--port 99999`, `--max-n 0`, `--api-key ""`) is one line and exit code 2 in the CLI.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from localllm.errors import LocalLLMError

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class ServerSettings:
    model_name: str  # the id /v1/models lists and every response carries
    aliases: tuple[str, ...] = ()  # other names of the model (file name ...), for strict mode
    api_key: str | None = None  # every route but /health then needs `Authorization: Bearer KEY`
    cors_origins: tuple[str, ...] = ()  # browser origins allowed to call (and read) the API
    max_body_bytes: int = 16 * 1024 * 1024  # larger request bodies get 413
    max_n: int = 16  # most choices one request may ask for
    # False: any `model` name is answered by the one loaded model (as llama-server does);
    # True: a name other than model_name/aliases gets 404 model_not_found
    strict_model_name: bool = False
    host: str = "127.0.0.1"  # the interface the server binds
    port: int = 8000
    allowed_hosts: tuple[str, ...] = ()  # extra Host header names accepted ("*": any)
    model_path: str = ""  # the GGUF file (Ollama's /api/tags and /api/show read its header)

    def __post_init__(self) -> None:
        checks = [
            (bool(self.model_name), "--served-model-name must not be empty"),
            (
                self.api_key is None or bool(self.api_key.strip()),
                "--api-key (or LOCALLLM_API_KEY) is set but empty: give a key, or unset it "
                "to serve without one",
            ),
            (self.max_body_bytes >= 1024, "max_body_bytes must be >= 1024"),
            (self.max_n >= 1, f"--max-n must be >= 1, got {self.max_n}"),
            (0 <= self.port <= 65535, f"--port must be in [0, 65535], got {self.port}"),
            (bool(self.host.strip()), "--host must not be empty"),
            (all(h.strip() for h in self.allowed_hosts), "--allowed-host must not be empty"),
        ]
        for ok, msg in checks:
            if not ok:
                raise LocalLLMError(msg)

    def serves(self, name: str | None) -> bool:
        """Whether a request's `model` is answered (always, unless strict_model_name)."""
        if name is None or not self.strict_model_name:
            return True
        name = name.removesuffix(":latest")  # Ollama clients add the default tag
        return name == self.model_name or name in self.aliases

    @property
    def loopback(self) -> bool:
        """Whether the server only listens on this machine."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return False


@dataclass
class LoadStatus:
    """Where loading the engine stands: "loading" -> "ok" | "error"."""

    state: str = "loading"
    error: str | None = None
    seconds: float | None = None
