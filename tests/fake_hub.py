"""A Hugging Face Hub stand-in on loopback, for pull tests without network.

It answers what huggingface_hub calls: `GET /api/models/{repo}[/revision/{rev}]` (with
`blobs=true` file metadata), `GET /api/models/{repo}/tree/{rev}` (snapshot_download's
listing), `HEAD` and ranged `GET` on `/{repo}/resolve/{rev}/{path}` with the Hub's headers
(X-Repo-Commit, ETag = sha256 for LFS files or the git blob id, X-Error-Code on 404s).
Failure modes: cut the connection half-way through a file's first GET; serve other bytes
than the hash it lists.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".gguf", ".safetensors")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    files: dict[str, bytes]
    commit: str
    served: dict[str, bytes] = field(default_factory=dict)  # GET returns these bytes instead

    def is_lfs(self, path: str) -> bool:
        return path.endswith(LFS_SUFFIXES)

    def etag(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha256(data).hexdigest() if self.is_lfs(path) else git_blob_id(data)

    def entry(self, path: str, tree: bool) -> dict:
        data = self.files[path]
        sha = hashlib.sha256(data).hexdigest()
        pointer = (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n"
        )
        lfs = self.is_lfs(path)
        out: dict = {"size": len(data), "oid" if tree else "blobId": git_blob_id(data)}
        if lfs:
            out["oid" if tree else "blobId"] = git_blob_id(pointer.encode())
            out["lfs"] = {"size": len(data), "pointerSize": len(pointer)}
            out["lfs"]["oid" if tree else "sha256"] = sha
        out.update({"type": "file", "path": path} if tree else {"rfilename": path})
        return out


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.cut_once: set[str] = set()  # "repo/path": first GET stops half-way
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range)
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def add_repo(self, repo_id: str, files: dict[str, bytes]) -> Repo:
        commit = hashlib.sha1((repo_id + "".join(sorted(files))).encode()).hexdigest()
        self.repos[repo_id] = Repo(dict(files), commit)
        return self.repos[repo_id]

    def gets(self, path: str) -> list[str | None]:
        """The Range header of every GET of a file (None: from the start)."""
        return [r for m, p, r in self.requests if m == "GET" and p.endswith("/" + path)]

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


_API = re.compile(r"^/api/models/([^/]+/[^/]+)(?:/(revision|tree)/([^/]+)(?:/.*)?)?$")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _send(self, code: int, body: bytes = b"", headers: dict | None = None) -> None:
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            if "Content-Length" not in (headers or {}):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, code: int, error_code: str, commit: str | None = None) -> None:
            headers = {"X-Error-Code": error_code, "Content-Type": "application/json"}
            if commit:
                headers["X-Repo-Commit"] = commit
            self._send(code, json.dumps({"error": error_code}).encode(), headers)

        def _repo(self, repo_id: str, rev: str | None) -> Repo | None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound")
            elif rev not in (None, "main", repo.commit):
                self._error(404, "RevisionNotFound")
                return None
            return repo

        def _api(self, m: re.Match) -> None:
            repo = self._repo(m.group(1), unquote(m.group(3)) if m.group(3) else None)
            if repo is None:
                return
            if m.group(2) == "tree":
                body = [repo.entry(p, tree=True) for p in sorted(repo.files)]
            else:
                siblings = [repo.entry(p, tree=False) for p in sorted(repo.files)]
                body = {"id": m.group(1), "sha": repo.commit, "private": False}
                body["siblings"] = siblings
            self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

        def _resolve(self, m: re.Match) -> None:
            repo = self._repo(m.group(1), unquote(m.group(2)))
            if repo is None:
                return
            path = unquote(m.group(3))
            if path not in repo.files:
                self._error(404, "EntryNotFound", repo.commit)
                return
            data = repo.served.get(path, repo.files[path])
            headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{repo.etag(path)}"'}
            headers["Accept-Ranges"] = "bytes"
            if self.command == "HEAD":
                self._send(200, b"", {**headers, "Content-Length": len(repo.files[path])})
                return
            self._get(f"{m.group(1)}/{path}", data, headers)

        def _get(self, key: str, data: bytes, headers: dict) -> None:
            rng = self.headers.get("Range")
            start = int(re.match(r"bytes=(\d+)-", rng).group(1)) if rng else 0  # type: ignore[union-attr]
            body = data[start:]
            if rng:
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            self.send_response(206 if rng else 200)
            for k, v in {**headers, "Content-Length": len(body)}.items():
                self.send_header(k, str(v))
            self.end_headers()
            with hub.lock:
                cut = key in hub.cut_once
                hub.cut_once.discard(key)
            if cut:  # half the body, then drop the connection
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

        def _route(self) -> None:
            path = urlsplit(self.path).path
            with hub.lock:
                hub.requests.append((self.command, path, self.headers.get("Range")))
            if (m := _API.match(path)) and self.command == "GET":
                self._api(m)
            elif m := _RESOLVE.match(path):
                self._resolve(m)
            else:
                self._send(404, b"not found")

        do_GET = do_HEAD = _route

    return Handler
