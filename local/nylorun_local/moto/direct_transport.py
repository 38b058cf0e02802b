"""botocore sends this process's requests to its own moto server over loopback HTTP: they run moto's WSGI app in-process.

Written for moto 5.2.5 and its botocore (pinned in pyproject.toml). Not a moto bug; only makes the local stand-in
faster: over loopback, HTTP (urllib3 and http.client on one side, werkzeug's server and a thread per connection on
the other) was a third of the local stack's CPU (bench/README.md, "The local stand-in's patches"). The same
application and the same backends, so nothing changes but the cost. tests/integration/test_local_aws.py and every
e2e test (all of the Runtime's own AWS calls) fail if moto's WSGI application or botocore's Endpoint change under it.
"""

from __future__ import annotations

from typing import Any

from nylorun_local.moto.patching import installing, replace

_direct_endpoints: set[str] = set()  # scheme://host:port of the moto servers this process runs
_direct_app: Any = None  # moto's WSGI application, once the direct transport is installed


def install_direct_transport(*endpoints: str) -> None:
    """Requests this process's own boto3 clients make to its own moto server skip the socket: each runs moto's WSGI
    application on the caller's thread, as moto's server would on one of its own. The same application and the
    same backends, so nothing changes but the cost. Over loopback, HTTP (urllib3 and http.client on one side,
    werkzeug's server and a thread per connection on the other) was a third of the local stack's CPU, all of it
    under one GIL with the Runtime it stands in for (bench/README.md, figure 6). Other processes (the CLI, a
    receiver) still reach the same moto over HTTP."""
    global _direct_app
    with installing:
        _direct_endpoints.update(endpoints)
        if _direct_app is not None:
            return
        from botocore.endpoint import Endpoint
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        _direct_app = DomainDispatcherApplication(create_backend_app)
        original_send = Endpoint._send

        def send(self: Any, request: Any) -> Any:
            parts = request.url.split("/", 3)
            if "/".join(parts[:3]) not in _direct_endpoints:
                return original_send(self, request)
            return _run_in_process(request)

        replace(__name__, Endpoint, "_send", send)


def remove_direct_transport(*endpoints: str) -> None:
    """Those endpoints' requests go over HTTP again."""
    _direct_endpoints.difference_update(endpoints)


def _run_in_process(request: Any) -> Any:
    """One botocore request through moto's WSGI application, the environ built as werkzeug's server builds it."""
    import io
    import sys
    from urllib.parse import unquote, urlsplit

    from botocore.awsrequest import AWSResponse
    from moto.core.botocore_stubber import MockRawResponse
    from moto.core.request import (
        PRESERVED_HEADER_NAMES_ENVIRON_KEY,
        environ_key_for_header,
        should_preserve_original_header_name,
    )

    from nylorun_local.moto_server import call_app  # imports moto: not before the local stack needs it

    url = urlsplit(request.url)
    body = request.body
    if hasattr(body, "read"):
        body = body.read()
    if isinstance(body, str):
        body = body.encode()
    body = body or b""

    def latin1(value: str) -> str:  # PEP 3333: environ strings are bytes decoded as latin-1
        return value.encode().decode("latin-1")

    raw_path = url.path + (f"?{url.query}" if url.query else "")
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url.scheme,
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": latin1(unquote(url.path)),
        "QUERY_STRING": latin1(url.query),
        "REQUEST_URI": latin1(raw_path),
        "RAW_URI": latin1(raw_path),
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": 0,
        "SERVER_NAME": url.hostname or "127.0.0.1",
        "SERVER_PORT": str(url.port or 80),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": url.netloc,
        "CONTENT_LENGTH": str(len(body)),
    }
    names: dict[str, str] = {}
    for name, value in request.headers.items():
        value = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        key = environ_key_for_header(name)
        if "_" in name:
            if should_preserve_original_header_name(name):  # as moto's own request handler keeps them
                names.setdefault(key, name)
                environ[key] = value
            continue
        environ[key] = value
    environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = names
    line, answered, content = call_app(_direct_app, environ)
    headers: dict[str, str] = {}
    for name, value in answered:
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return AWSResponse(request.url, int(line.split(" ", 1)[0]), headers, MockRawResponse(content))
