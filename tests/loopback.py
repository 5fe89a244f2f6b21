"""The one way the tests' fake HTTP servers run: a handler class on 127.0.0.1 in a daemon thread.

:class:`LoopbackServer` holds the server and its thread; :mod:`tests.llm_server`, :mod:`tests.embed_server`
and :mod:`tests.hf_server` subclass it, build their handler in ``start()`` and call :meth:`_serve`.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackServer:
    """Base of the fake servers: ``with Server(...) as s:`` starts it; ``close()`` (or ``stop()``) ends it."""

    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Any:  # pragma: no cover - each server defines it
        raise NotImplementedError

    def _serve(self, handler: type[BaseHTTPRequestHandler], *, queue: int | None = None) -> None:
        """Serve ``handler`` on a free port of 127.0.0.1 in a daemon thread."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        if queue is not None:
            self._server.request_queue_size = queue
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    stop = close

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
