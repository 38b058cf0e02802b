"""HTTP to callers' URLs (push deliveries, and fetching callers' `url` files), safely: resolve the host, refuse non-public addresses unless allowed, and connect
to the very address that was checked (no second DNS lookup, so no rebinding window). TLS still verifies the
certificate against the host name. Redirects are never followed.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import urllib3

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
        self._timeout = urllib3.Timeout(connect=min(5.0, timeout_seconds), read=timeout_seconds)
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

    def _connect(self, url: str) -> tuple[Any, str, str]:
        """A connection pool to the checked address of `url`'s host, its request path, and its Host header."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        secure = parts.scheme == "https"
        port = parts.port or (443 if secure else 80)
        address = self.checked_address(host, port)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        default_port = (secure and port == 443) or (not secure and port == 80)
        host_header = (f"[{host}]" if ":" in host else host) + ("" if default_port else f":{port}")
        pool: Any
        if secure:
            pool = urllib3.HTTPSConnectionPool(
                address, port, timeout=self._timeout, retries=False, server_hostname=host, assert_hostname=host
            )
        else:
            pool = urllib3.HTTPConnectionPool(address, port, timeout=self._timeout, retries=False)
        return pool, path, host_header

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> HttpResult:
        pool, path, host_header = self._connect(url)
        try:
            response = pool.urlopen(
                "POST",
                path,
                body=body,
                headers={**headers, "Host": host_header},
                redirect=False,  # a redirect could point anywhere, private addresses included
                retries=False,
                preload_content=False,
            )
            response.read(64 * 1024)  # the answer's body is not used; read a little so the connection closes
            response.release_conn()
            return HttpResult(status=response.status, headers={k.lower(): v for k, v in response.headers.items()})
        finally:
            pool.close()

    def get(self, url: str, max_bytes: int) -> tuple[bytes, str | None]:
        """GET a caller's file with the same address checks; refuses bodies over `max_bytes`."""
        pool, path, host_header = self._connect(url)
        try:
            response = pool.urlopen(
                "GET", path, headers={"Host": host_header}, redirect=False, retries=False, preload_content=False
            )
            if response.status != 200:
                raise ConnectionError(f"HTTP {response.status}")
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise FileTooLarge(declared)
            data = response.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise FileTooLarge(str(len(data)))
            return data, response.headers.get("content-type")
        finally:
            pool.close()


if TYPE_CHECKING:  # mypy fails here when a port changes and this adapter does not follow
    _sender: Sender = WebhookSender(timeout_seconds=1)
    _fetcher: Fetcher = WebhookSender(timeout_seconds=1)
