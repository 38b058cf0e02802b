"""The SSRF filter and IPv4-embedding IPv6 addresses (docs/decisions/0011-ssrf-ipv4-in-ipv6.md): `::ffff:10.0.0.1`
was unwrapped, but the same private or metadata address written as NAT64 (`64:ff9b::/96`, RFC 6052), 6to4
(`2002::/16`, RFC 3056) or IPv4-compatible (`::/96`, RFC 4291) passed as "global". Each is now judged by the IPv4
address inside it; the local-use NAT64 prefix (`64:ff9b:1::/48`, RFC 8215: where the address sits depends on a
prefix length the Runtime cannot know) and Teredo (`2001::/32`) are refused outright.

Both checks are tried: the one made when a push config or url part names the URL (a literal address), and the
one made on every connection (the resolved address: a name may resolve to any of these)."""

from __future__ import annotations

import pytest
from nylorun.adapters.webhooks import AddressRefused, WebhookSender, address_allowed
from nylorun.domain.urls import PushUrlRejected, check_push_url

# Private, loopback, link-local (the instance metadata service) and shared addresses, each in every wrapping.
INSIDE = {
    "NAT64 10.0.0.1": "64:ff9b::a00:1",
    "NAT64 metadata": "64:ff9b::a9fe:a9fe",
    "NAT64 127.0.0.1": "64:ff9b::7f00:1",
    "6to4 10.0.0.1": "2002:a00:1::1",
    "6to4 metadata": "2002:a9fe:a9fe::",
    "6to4 192.168.1.1": "2002:c0a8:101::1",
    "v4-compatible 10.0.0.1": "::a00:1",
    "v4-compatible metadata": "::a9fe:a9fe",
    "v4-mapped 10.0.0.1": "::ffff:10.0.0.1",
    "local-use NAT64 (public v4 inside)": "64:ff9b:1::808:808",
    "local-use NAT64 (private v4 inside)": "64:ff9b:1:a00:1::",
    "Teredo": "2001:0:4136:e378:8000:63bf:f5ff:fffe",
}
# The same wrappings around a public address still reach the Internet: allowed.
OUTSIDE = {
    "NAT64 8.8.8.8": "64:ff9b::808:808",
    "6to4 8.8.8.8": "2002:808:808::1",
    "v4-compatible 8.8.8.8": "::808:808",
    "v4-mapped 8.8.8.8": "::ffff:8.8.8.8",
    "plain IPv6": "2606:4700:4700::1111",
}


@pytest.mark.parametrize("address", INSIDE.values(), ids=INSIDE.keys())
def test_an_ipv4_embedding_address_of_an_inside_host_is_refused(address: str) -> None:
    # When a push URL names it as a literal
    with pytest.raises(PushUrlRejected, match="not a public address"):
        check_push_url(f"https://[{address}]/hook", allowed_hosts=["*"], http_hosts=[])
    # And when a name resolves to it at delivery time
    sender = WebhookSender(timeout_seconds=1, resolver=lambda host, port: [address])
    with pytest.raises(AddressRefused):
        sender.checked_address("receiver.example", 443)
    # Then both refuse it, loopback allowed or not (none of these is loopback)
    assert not address_allowed(address, allow_loopback=False)


@pytest.mark.parametrize("address", OUTSIDE.values(), ids=OUTSIDE.keys())
def test_the_same_wrappings_of_a_public_address_are_allowed(address: str) -> None:
    assert check_push_url(f"https://[{address}]/hook", allowed_hosts=["*"], http_hosts=[])
    assert address_allowed(address, allow_loopback=False)


def test_loopback_stays_a_local_choice_in_every_wrapping() -> None:
    # A local Runtime allows loopback receivers (the TCK's); wrapped loopback follows the same switch
    for address in ("::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::"):
        assert address_allowed(address, allow_loopback=True)
        assert not address_allowed(address, allow_loopback=False)
