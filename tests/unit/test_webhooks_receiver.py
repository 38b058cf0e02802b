"""`nylorun webhooks`' own logic, without a server: where it fetches a caller's keys, how long it
remembers a webhook-id, and how it picks up keys after a rotation."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from nylorun_client import webhooks
from nylorun_client.webhooks import ReplayCache, SecretsUnavailable, Verifier, signing_secrets_url
from standardwebhooks import Webhook

OLD, NEW = ("whsec_" + base64.b64encode(bytes([n]) * 32).decode() for n in (1, 2))
BODY = b'{"statusUpdate":{}}'


def signed(secret: str, webhook_id: str = "msg_1") -> dict[str, str]:
    now = datetime.now(UTC)
    return {"webhook-id": webhook_id, "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": Webhook(secret).sign(webhook_id, now, BODY.decode())}


@pytest.mark.parametrize(
    "agent_url",
    [
        "http://127.0.0.1:8080/v1/a2a/agents/support",
        "http://127.0.0.1:8080/v1/a2a/agents/support/",
        "http://127.0.0.1:8080/v1/a2a/agents",
    ],
)
def test_the_keys_are_fetched_beside_the_agents(agent_url: str) -> None:
    assert signing_secrets_url(agent_url) == "http://127.0.0.1:8080/v1/a2a/push-signing-secrets"


def test_a_url_that_is_not_an_agents_is_refused_with_a_reason() -> None:
    with pytest.raises(SecretsUnavailable, match="not an Agent URL"):
        signing_secrets_url("http://127.0.0.1:8080/hooks")


def test_a_webhook_id_is_remembered_through_the_tolerance_window_then_forgotten() -> None:
    # Given a cache on a clock of our own
    now = [0.0]
    cache = ReplayCache(clock=lambda: now[0])
    # Then an id is new once; seen again within 2 x 5 minutes (a timestamp may be 5 minutes old or ahead) it is a
    # replay; after that standardwebhooks refuses its timestamp anyway, and the cache lets it go (bounded memory)
    assert cache.first_time("msg_1") is True
    now[0] = 599.0
    assert cache.first_time("msg_1") is False
    now[0] = 1200.0
    assert cache.first_time("msg_1") is True


def test_after_a_failed_signature_keys_from_the_runtime_are_fetched_again_at_most_once_a_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a receiver that fetched alice's key before the Runtime's secret rotated
    clock = [1000.0]
    monkeypatch.setattr(webhooks.time, "monotonic", lambda: clock[0])
    fetches: list[list[str]] = []

    def refetch() -> list[str]:
        fetches.append([NEW])
        return [NEW]

    verifier = Verifier([OLD], refetch)
    # When a delivery signed with the new key arrives within the minute after the fetch: refused, no refetch
    assert verifier.failure(BODY, signed(NEW)) is not None and fetches == []
    # Then once a minute has passed the next failure fetches the keys again, and the delivery verifies
    clock[0] += 61
    assert verifier.failure(BODY, signed(NEW)) is None and len(fetches) == 1
    # And a forged delivery right after does not make it fetch again (no request storm from a forger)
    assert verifier.failure(BODY, signed(OLD)) is not None and len(fetches) == 1


def test_a_receiver_with_fixed_secrets_verifies_with_any_of_them() -> None:
    verifier = Verifier([NEW, OLD])
    assert verifier.failure(BODY, signed(OLD)) is None and verifier.failure(BODY, signed(NEW)) is None
    with pytest.raises(SecretsUnavailable, match="InvalidSecret"):
        Verifier(["whsec_"])
