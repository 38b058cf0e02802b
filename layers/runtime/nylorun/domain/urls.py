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


# IPv6 prefixes that carry an IPv4 address the packet really goes to (RFC 6052, RFC 3056, RFC 4291 §2.5.5):
# each is judged by the IPv4 address inside it, or `10.0.0.1` is reachable as `64:ff9b::a00:1`.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052 well-known prefix: v4 in the last 32 bits
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")  # RFC 3056: v4 in bits 16-48
_V4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # RFC 4291 §2.5.5.1 (deprecated): v4 in the last 32 bits
# Refused outright: where the v4 address sits depends on a prefix length or relay the Runtime cannot know
# (RFC 8215 local-use NAT64 prefixes are /48 up to /96; Teredo carries a server and an obfuscated client).
_AMBIGUOUS = (ipaddress.IPv6Network("64:ff9b:1::/48"), ipaddress.IPv6Network("2001::/32"))


def public_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address, *, allow_loopback: bool) -> bool:
    """May the Runtime connect to `address`? Only public unicast addresses (169.254.169.254, private ranges,
    multicast, reserved and unspecified are not), loopback only when allowed; an IPv4-embedding IPv6
    address is judged by the IPv4 address it embeds."""
    if address.is_loopback:
        return allow_loopback
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in network for network in _AMBIGUOUS):
            return False
        if address.ipv4_mapped is not None:
            return public_address(address.ipv4_mapped, allow_loopback=allow_loopback)
        if address.sixtofour is not None:
            return public_address(address.sixtofour, allow_loopback=allow_loopback)
        if address in _NAT64 or address in _V4_COMPATIBLE:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
            return public_address(embedded, allow_loopback=allow_loopback)
    return bool(address.is_global) and not address.is_multicast


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
    return public_address(address, allow_loopback=False)


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
