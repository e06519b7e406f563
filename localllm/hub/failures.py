"""huggingface_hub and network exceptions -> one-line HubErrors that say what to do.

A failed network call also says where to put the files by hand (our models folder, which
`--model owner/repo[:QUANT]` and `localllm list` search without any network).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from huggingface_hub import constants
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from localllm.errors import HubError, LocalLLMError
from localllm.hub.locations import manual_folder
from localllm.hub.refs import RepoRef


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def manual_hint(ref: RepoRef) -> str:
    """Where to put the files by hand, and under which name."""
    folder = manual_folder(ref.repo_id)
    if ref.filename:
        what, name = ref.filename.rsplit("/", 1)[-1], "that name"
    elif ref.quant:
        what, name = f"the {ref.quant.upper()} .gguf file", f"its name, which contains {ref.quant}"
    else:
        what, name = (
            "the .gguf file (or the config, tokenizer and .safetensors files)",
            "their names",
        )
    return f"to install it by hand, download {what} from {ref.url} into {folder}/ (keep {name})"


def _network(ref: RepoRef, endpoint: str, e: BaseException) -> str:
    return f"cannot reach the Hugging Face Hub at {endpoint} ({_first_line(e)}); {manual_hint(ref)}"


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection-level errors of whichever HTTP stack this huggingface_hub uses."""
    out: list[type[BaseException]] = [ConnectionError, TimeoutError, LocalEntryNotFoundError]
    for mod, name in (("httpx2", "TransportError"), ("httpx", "TransportError")):
        try:
            out.append(getattr(importlib.import_module(mod), name))
        except (ImportError, AttributeError):
            continue
    return tuple(out)


Message = Callable[[RepoRef, str, BaseException], str]
# most specific first: GatedRepoError is a RepositoryNotFoundError, LocalEntryNotFoundError
# an EntryNotFoundError, OfflineModeIsEnabled a ConnectionError
_MESSAGES: list[tuple[tuple[type[BaseException], ...], Message]] = [
    (
        (OfflineModeIsEnabled,),
        lambda r, ep, e: f"HF_HUB_OFFLINE is set, so {r} cannot be downloaded; {manual_hint(r)}",
    ),
    (
        (GatedRepoError,),
        lambda r, ep, e: (
            f"{r.repo_id} is gated: accept its terms at {r.url} and log in "
            "(`hf auth login`, or set HF_TOKEN)"
        ),
    ),
    (
        (RepositoryNotFoundError,),
        lambda r, ep, e: (
            f"{r.repo_id}: no such model repository on {ep} "
            "(a private one needs `hf auth login` or HF_TOKEN)"
        ),
    ),
    (
        (RevisionNotFoundError,),
        lambda r, ep, e: f"{r.repo_id} has no revision {r.revision!r}",
    ),
    (_transport_errors(), _network),
    (
        (EntryNotFoundError,),
        lambda r, ep, e: f"{r.repo_id} has no file {r.filename or ''} on {ep}".rstrip(),
    ),
    (
        (HfHubHTTPError,),
        lambda r, ep, e: f"the Hub at {ep} refused {r} ({_first_line(e)})",
    ),
    (
        (OSError,),
        lambda r, ep, e: f"downloading {r} failed ({_first_line(e)}); run the pull again",
    ),
]


def describe(ref: RepoRef, endpoint: str | None, e: BaseException) -> str | None:
    ep = (endpoint or constants.ENDPOINT).rstrip("/")
    for types, message in _MESSAGES:
        if isinstance(e, types):
            return message(ref, ep, e)
    return None


@contextmanager
def hub_errors(ref: RepoRef, endpoint: str | None) -> Iterator[None]:
    """Re-raise what huggingface_hub and the network throw as one-line HubErrors."""
    try:
        yield
    except LocalLLMError:
        raise
    except Exception as e:
        text = describe(ref, endpoint, e)
        if text is None:
            raise
        raise HubError(text) from e
