"""A fake Hugging Face hub on 127.0.0.1 for tests (stdlib only): point ``HF_ENDPOINT`` at it.

It answers the calls ``huggingface_hub.snapshot_download(repo_type="dataset")`` makes (read from the
installed ``huggingface_hub`` source and checked with :attr:`FakeHub.requests`):

* ``GET /api/datasets/{owner}/{name}/revision/{revision}``: the repo info (``sha``, ``siblings``,
  ``gated``); also ``GET /api/datasets/{owner}/{name}`` without a revision (``repo_exists``);
* ``GET /api/datasets/{owner}/{name}/tree/{commit}?recursive=true``: the file listing (one page);
* ``HEAD /datasets/{owner}/{name}/resolve/{commit}/{path}``: the file metadata (``X-Repo-Commit``,
  ``ETag``, ``Content-Length``), then ``GET`` of the same URL: the bytes.

As the hub does: an unknown repo answers 401 (no token) or 404 (a token) with ``X-Error-Code:
RepoNotFound``; a gated repo lists its metadata and files to anyone, but its ``resolve`` URLs answer 401
without a token and 403 with a token that was not granted access, with ``X-Error-Code: GatedRepo``.
Every request is recorded in :attr:`FakeHub.requests` as ``(method, path, authorised)``; a test script
may ``GET /__mark__/<name>`` to split the log into scenarios (:meth:`FakeHub.by_mark`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.loopback import LoopbackServer


@dataclass
class Repo:
    """One dataset repository: its files (path -> bytes), whether it is gated, who may read it."""

    files: dict[str, bytes]
    gated: bool = False
    granted: set[str] = field(default_factory=set)

    @property
    def sha(self) -> str:
        digest = hashlib.sha1()
        for path in sorted(self.files):
            digest.update(path.encode() + b"\0" + self.files[path])
        return digest.hexdigest()


def _oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id


class FakeHub(LoopbackServer):
    """A threaded loopback hub serving dataset repos; use as a context manager."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str, bool]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def add_dataset(self, repo_id: str, files: dict[str, bytes], *, gated: bool = False) -> Repo:
        """Serve ``files`` as the dataset ``repo_id``."""
        self.repos[repo_id] = Repo(dict(files), gated=gated)
        return self.repos[repo_id]

    def by_mark(self) -> dict[str, list[tuple[str, str, bool]]]:
        """The requests after each ``/__mark__/<name>`` request, up to the next mark."""
        out: dict[str, list[tuple[str, str, bool]]] = {}
        current = None
        for method, path, auth in self.requests:
            if path.startswith("/__mark__/"):
                current = path[len("/__mark__/") :]
                out[current] = []
            elif current is not None:
                out[current].append((method, path, auth))
        return out

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeHub:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, status: int, body: bytes, headers: dict[str, str], head: bool = False) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self._reply(status, data, {"Content-Type": "application/json", **(headers or {})})

            def _error(self, status: int, code: str, message: str, head: bool = False) -> None:
                headers = {
                    "X-Error-Code": code,
                    "X-Error-Message": message,
                    "Content-Type": "application/json",
                }
                self._reply(status, json.dumps({"error": message}).encode(), headers, head=head)

            def do_HEAD(self) -> None:
                owner._handle(self, "HEAD")

            def do_GET(self) -> None:
                owner._handle(self, "GET")

        self._serve(Handler)
        return self

    def _handle(self, h: Any, method: str) -> None:
        url = urlsplit(h.path)
        auth = h.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else None
        with self._lock:
            self.requests.append((method, h.path, token is not None))
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        head = method == "HEAD"
        if parts[0] == "__mark__":  # the tests' own marker between scenarios, not a hub call
            h._json(200, {"mark": "/".join(parts[1:])})
            return
        if len(parts) >= 4 and parts[:2] == ["api", "datasets"]:
            repo_id, rest = f"{parts[2]}/{parts[3]}", parts[4:]
            kind = "api"
        elif len(parts) >= 6 and parts[0] == "datasets" and parts[3] == "resolve":
            repo_id, rest = f"{parts[1]}/{parts[2]}", parts[4:]
            kind = "resolve"
        else:
            h._error(404, "NotFound", f"no route for {url.path}", head=head)
            return
        repo = self.repos.get(repo_id)
        if repo is None:
            status = 404 if token else 401
            h._error(status, "RepoNotFound", "Repository not found", head=head)
            return
        if kind == "api":
            self._api(h, repo_id, repo, rest)
            return
        revision, path = rest[0], "/".join(rest[1:])
        if revision not in (repo.sha, "main"):
            h._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head=head)
            return
        if repo.gated and token not in repo.granted:
            status, what = (
                (403, "is restricted and you are not in the authorized list")
                if token
                else (
                    401,
                    "is restricted. You must have access to it and be authenticated to access it. "
                    "Please log in.",
                )
            )
            h._error(status, "GatedRepo", f"Access to dataset {repo_id} {what}", head=head)
            return
        if path not in repo.files:
            h._error(404, "EntryNotFound", f"{path} does not exist on {revision}", head=head)
            return
        data = repo.files[path]
        headers = {
            "X-Repo-Commit": repo.sha,
            "ETag": f'"{_oid(data)}"',
            "Content-Type": "application/octet-stream",
        }
        h._reply(200, data, headers, head=head)

    def _api(self, h: Any, repo_id: str, repo: Repo, rest: list[str]) -> None:
        if not rest or rest[0] == "revision":
            if rest and rest[1:] and rest[1] not in ("main", repo.sha):
                h._error(404, "RevisionNotFound", f"Invalid rev id: {rest[1]}")
                return
            h._json(
                200,
                {
                    "_id": repo.sha[:24],
                    "id": repo_id,
                    "author": repo_id.split("/")[0],
                    "sha": repo.sha,
                    "private": False,
                    "gated": "manual" if repo.gated else False,
                    "disabled": False,
                    "downloads": 0,
                    "likes": 0,
                    "tags": [],
                    "siblings": [{"rfilename": p} for p in sorted(repo.files)],
                    "lastModified": "2026-01-01T00:00:00.000Z",
                },
            )
            return
        if rest[0] == "tree":
            entries, folders = [], set()
            for path in sorted(repo.files):
                parents = path.split("/")[:-1]
                for i in range(1, len(parents) + 1):
                    folders.add("/".join(parents[:i]))
                data = repo.files[path]
                entries.append({"type": "file", "oid": _oid(data), "size": len(data), "path": path})
            entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in sorted(folders)]
            h._json(200, entries)
            return
        h._error(404, "NotFound", f"no api route {'/'.join(rest)}")
