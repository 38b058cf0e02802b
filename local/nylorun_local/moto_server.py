"""moto's HTTP server for other processes (the push function's environments, the CLI, a receiver fetching a file),
with keep-alive connections.

moto's own server (`moto.server.ThreadedMotoServer`, werkzeug's development server) closes the connection after
every response (werkzeug: "This disables HTTP/1.1 keep-alive connections"), so each call a client makes is a new
TCP connection and, in the Runtime's process, a new thread: accepting it, starting the thread, and a drain of up to
10 ms after the answer. Under the fair-push figure (bench/README.md) that was a sixth of the server threads'
time, and every one of those steps waits again for the interpreter lock that moto, the api and the turn share. Here a connection
stays open for the client's next call: each call is one read of the request, moto's WSGI application (the same
one, the same backends), one write of the answer.

Requests are answered one at a time, their callers in turns (turns.py): one task's deliveries, from every push
environment at once, do not make another subject's calls wait behind all of them.

A connection is kept only when its request body was read to its end: bodies come with a Content-Length (botocore
always sends one) and are read whole before moto sees them; a chunked body, or a client asking for it, closes.
"""

from __future__ import annotations

import io
import threading
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

from nylorun_local.turns import FLOW_HEADER, TURNS

# Answers with no body and no Content-Length of their own (RFC 9110 §8.6).
_NO_BODY = {204, 304}


def call_app(app: Any, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """One request through a WSGI application (moto's): its status line, headers and whole body."""
    answer: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        answer[:] = [status, headers]
        return lambda data: None  # moto returns its body; nothing writes through this

    chunks = app(environ, start_response)
    try:
        content = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    return answer[0], answer[1], content


class KeepAliveHandler(MotoRequestHandler):
    """moto's request handler (its environ, the headers it keeps), answering over a connection that stays open."""

    protocol_version = "HTTP/1.1"

    def run_wsgi(self) -> None:
        environ = self.make_environ()  # werkzeug's and moto's: path, headers, underscore headers kept
        if environ.get("wsgi.input_terminated"):  # chunked: read to its end, then close (no length to trust)
            body = environ["wsgi.input"].read()
            self.close_connection = True
        else:
            if self.headers.get("Expect", "").lower().strip(" \t") == "100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            declared = self.headers.get("Content-Length") or "0"
            # Not a number: no body, as werkzeug reads it; what follows on the connection cannot be trusted, so close.
            if not (declared.isascii() and declared.isdigit()):
                declared, self.close_connection = "0", True
            length = int(declared)
            body = self.rfile.read(length) if length > 0 else b""
            if len(body) < length:  # the client went away mid-body
                self.close_connection = True
                return
        environ["wsgi.input"] = io.BytesIO(body)
        flow = self.headers.get(FLOW_HEADER) or "{}:{}".format(*self.client_address[:2])
        try:
            with TURNS.serving(flow):
                status, headers, content = call_app(self.server.app, environ)
        except Exception as exc:  # noqa: BLE001 - as werkzeug's server: a 500, never the traceback, to the client
            self.log_error("moto failed on %s %s: %s", self.command, self.path, type(exc).__name__)
            status, headers, content = (
                "500 Internal Server Error",
                [("Content-Type", "text/plain")],
                b"Internal Server Error",
            )
            self.close_connection = True
        self._answer(status, headers, content)

    def _answer(self, status: str, headers: list[tuple[str, str]], content: bytes) -> None:
        code = int(status.split(" ", 1)[0])
        names = {name.lower() for name, _ in headers}
        lines = [f"HTTP/1.1 {status}"]
        lines += [f"{name}: {value}" for name, value in headers if name.lower() != "connection"]
        if "content-length" not in names and code not in _NO_BODY and not 100 <= code < 200:
            lines.append(f"Content-Length: {len(content)}")
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        # One write: each write gives up the interpreter lock and waits for it again.
        self.wfile.write(head if self.command == "HEAD" or code in _NO_BODY else head + content)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return  # moto's server is quiet locally (werkzeug's logger is set to errors only)


class MotoServer:
    """moto's server application on 127.0.0.1:`port`, in a thread, a thread per connection."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server(
            "127.0.0.1", self._port, app, threaded=True, request_handler=KeepAliveHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()  # open connections' threads are daemons: they end with their clients
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
