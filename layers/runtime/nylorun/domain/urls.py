"""Which URLs a caller may name: a push config's URL, and a `url` file part the Runtime fetches (A2A's SSRF
guidance; Profile v2: "to hosts the Runtime allows"). This is the check made when the URL is given; the
request itself re-checks the resolved address (`adapters/webhooks.py`).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit


class PushUrlRejected(ValueError):
    pass


def _host_allowed(host: str, allowed: list[str]) -> bool:
    for pattern in allowed:
        if pattern == "*" or pattern == host:
            return True
        if pattern.startswith("*.") and host.endswith(pattern[1:]):
            return True
    return False


def _is_public_literal(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            # "127.1", "2130706433", "0x0a.0.0.1": not names but IPv4 shorthands the resolver turns
            # into addresses without any DNS, so judge the address they stand for.
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            return True  # a name: its addresses are checked when a delivery resolves it
    return address.is_global


def check_push_url(url: str, *, allowed_hosts: list[str], http_hosts: list[str]) -> str:
    """Return the URL if a config may use it, else raise PushUrlRejected saying why."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a bad port
    except ValueError:
        raise PushUrlRejected("url is not a valid URL") from None
    host = (parts.hostname or "").lower()
    if parts.scheme not in {"https", "http"} or not host:
        raise PushUrlRejected("url must be an absolute https:// URL")
    if parts.username or parts.password:
        raise PushUrlRejected("url must not carry credentials; use `authentication`")
    explicitly_listed = host in http_hosts or any(p == host for p in allowed_hosts)
    if parts.scheme == "http" and host not in http_hosts:
        raise PushUrlRejected(f"url must use https (plain http only to {', '.join(http_hosts) or 'no host'})")
    if not _host_allowed(host, allowed_hosts) and host not in http_hosts:
        raise PushUrlRejected(f"push notifications to {host} are not allowed by this Runtime")
    if not explicitly_listed and not _is_public_literal(host):
        raise PushUrlRejected(f"{host} is not a public address")
    if port is not None and not 0 < port < 65536:
        raise PushUrlRejected("url has an invalid port")
    return url
