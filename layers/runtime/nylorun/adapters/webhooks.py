"""HTTP to callers' URLs (push deliveries, and fetching callers' `url` files), safely: resolve the host, refuse non-public addresses unless allowed, and connect
to the very address that was checked (no second DNS lookup, so no rebinding window). TLS still verifies the
certificate against the host name. Redirects are never followed.

Every request has one overall deadline (connect + send + read). Socket timeouts alone bound each
read, so a peer dripping one byte at a time could hold a request (and the function running it) for ever; at the
deadline a watchdog shuts the socket down, which ends whatever read or write is blocked on it.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import urllib3.connection

from nylorun.domain.urls import public_address
from nylorun.ports import AddressRefused, Fetcher, FileTooLarge, HttpResult, Sender

Resolver = Callable[[str, int], list[str]]


def system_resolver(host: str, port: int) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def address_allowed(address: str, *, allow_loopback: bool) -> bool:
    return public_address(ipaddress.ip_address(address), allow_loopback=allow_loopback)


class WebhookSender:
    def __init__(
        self,
        *,
        timeout_seconds: float,
        allow_loopback: bool = False,
        private_hosts: frozenset[str] = frozenset(),
        resolver: Resolver = system_resolver,
    ) -> None:
        self._timeout = float(timeout_seconds)  # the overall deadline of one request
        self._allow_loopback = allow_loopback
        self._private_hosts = private_hosts
        self._resolve = resolver

    def checked_address(self, host: str, port: int) -> str:
        """The first resolved address a delivery may connect to, or AddressRefused."""
        try:
            addresses = self._resolve(host, port)
        except OSError as exc:
            raise ConnectionError(f"cannot resolve {host}") from exc
        if host in self._private_hosts:
            return addresses[0]  # explicitly allowed to live on a private network
        for address in addresses:
            if address_allowed(address, allow_loopback=self._allow_loopback):
                return address
        raise AddressRefused(f"{host} resolves only to non-public addresses")

    def _connect(self, url: str, seconds: float) -> tuple[Any, str, str]:
        """A connection to the checked address of `url`'s host (not yet open), its request path, and its Host
        header. No single socket wait outlasts `seconds`."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        secure = parts.scheme == "https"
        port = parts.port or (443 if secure else 80)
        address = self.checked_address(host, port)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        default_port = (secure and port == 443) or (not secure and port == 80)
        host_header = (f"[{host}]" if ":" in host else host) + ("" if default_port else f":{port}")
        connection: Any
        if secure:
            connection = urllib3.connection.HTTPSConnection(
                address, port, timeout=seconds, server_hostname=host, assert_hostname=host
            )
        else:
            connection = urllib3.connection.HTTPConnection(address, port, timeout=seconds)
        return connection, path, host_header

    @contextmanager
    def _request(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], timeout: float | None = None
    ) -> Iterator[Any]:
        """The response to one request (redirects not followed), all of it within `timeout` (None: this sender's
        timeout). Past it, whatever is blocked raises TimeoutError."""
        budget = self._timeout if timeout is None else float(timeout)
        connection, path, host_header = self._connect(url, budget)
        expired = threading.Event()

        def cut() -> None:
            expired.set()
            sock = connection.sock
            if sock is not None:
                with suppress(OSError):  # already closed
                    sock.shutdown(socket.SHUT_RDWR)

        watchdog = threading.Timer(budget, cut)
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.request(method, path, body=body, headers={**headers, "Host": host_header}, preload_content=False)
            response = connection.getresponse()
            yield response
            # A cut socket reads as the end of the body: a body without a Content-Length would look complete.
            if expired.is_set():
                raise TimeoutError(f"no complete answer within {budget:g} s")
        except Exception as exc:
            if expired.is_set() and not isinstance(exc, TimeoutError):
                raise TimeoutError(f"no complete answer within {budget:g} s") from exc
            raise
        finally:
            watchdog.cancel()
            connection.close()

    def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout_seconds: float | None = None
    ) -> HttpResult:
        with self._request("POST", url, body, headers, timeout_seconds) as response:
            # The answer's body is not used (the connection is closed, not reused): the status and headers are it.
            return HttpResult(status=response.status, headers={k.lower(): v for k, v in response.headers.items()})

    def get(self, url: str, max_bytes: int) -> tuple[bytes, str | None]:
        """GET a caller's file with the same address checks and deadline; refuses bodies over `max_bytes`."""
        with self._request("GET", url, None, {}) as response:
            if response.status != 200:
                raise ConnectionError(f"HTTP {response.status}")
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise FileTooLarge(declared)
            data = response.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise FileTooLarge(str(len(data)))
            return bytes(data), response.headers.get("content-type")


if TYPE_CHECKING:  # mypy fails here when a port changes and this adapter does not follow
    _sender: Sender = WebhookSender(timeout_seconds=1)
    _fetcher: Fetcher = WebhookSender(timeout_seconds=1)
