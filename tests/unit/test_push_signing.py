"""Per-subject push signing keys (docs/security.md, nylorun.domain.signing): each subject's deliveries are signed with a
key derived from the Runtime secret(s) and the subject, so one subject's key verifies its own deliveries only."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from nylorun.domain.signing import signing_secrets, subject_secret
from nylorun.service.push import sign
from nylorun.service.signing import PushSigningKeys
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

RUNTIME = "whsec_" + base64.b64encode(b"r" * 32).decode()
NEWER = "whsec_" + base64.b64encode(b"n" * 32).decode()
BODY = '{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}'


def verifies(secret: str, signature: str, body: str = BODY) -> bool:
    now = datetime.now(UTC)
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp())), "webhook-signature": signature}
    try:
        Webhook(secret).verify(body, headers)
        return True
    except WebhookVerificationError:
        return False


def signature(secrets: list[str], body: str = BODY) -> str:
    return sign(secrets, "msg_1", datetime.now(UTC), body)


def test_a_subjects_key_is_a_standard_webhooks_secret_of_32_bytes_and_stable() -> None:
    # Given one Runtime secret
    # When alice's key is derived twice
    first, again = subject_secret(RUNTIME, "alice"), subject_secret(RUNTIME, "alice")
    # Then it is the same "whsec_" + base64 of 32 bytes each time (receivers keep it across restarts)
    assert first == again and first.startswith("whsec_")
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 32
    # And pinned to HMAC-SHA256(key, "nylorun/push-signing/v1" NUL subject), the value computed outside Python:
    #   printf 'nylorun/push-signing/v1\x00alice' | openssl dgst -sha256 -mac HMAC -macopt hexkey:7272…72 -binary | base64
    # A change to the derivation would silently change every receiver's key.
    assert first == "whsec_" + "vMeNpo7rvDZtiUzc0JcuE21rInklm2Y8Rqi43Ts4Jr0="


def test_the_bare_value_secrets_manager_stores_derives_the_same_key_as_its_whsec_form() -> None:
    # Given the deployed secret, stored without its "whsec_" prefix
    bare = RUNTIME.removeprefix("whsec_")
    # Then both spellings derive the same key (standardwebhooks reads both as the same key bytes)
    assert subject_secret(bare, "alice") == subject_secret(RUNTIME, "alice")


def broken_ignores_subject(secret: str, subject: str) -> str:
    return subject_secret(secret, "")


def broken_is_the_runtime_secret(secret: str, subject: str) -> str:
    return secret  # what main did: one shared secret


@pytest.mark.parametrize(
    ("derive", "isolated"),
    [(subject_secret, True), (broken_ignores_subject, False), (broken_is_the_runtime_secret, False)],
    ids=["derived-per-subject", "broken-ignores-subject", "broken-shared-secret"],
)
def test_one_subjects_key_does_not_verify_another_subjects_delivery(
    derive: Callable[[str, str], str], isolated: bool
) -> None:
    # Given a delivery for alice signed with alice's key
    signed = signature([derive(RUNTIME, "alice")])
    # Then alice's key verifies it, and bob's key does not (a broken derivation lets bob's through)
    assert verifies(derive(RUNTIME, "alice"), signed)
    assert verifies(derive(RUNTIME, "bob"), signed) is not isolated


def test_subjects_that_differ_only_in_how_they_would_concatenate_get_different_keys() -> None:
    # Then no two subjects share a key, whatever their characters
    subjects = ["alice", "alice ", "Alice", "ali", "", "ålice", "a\x00lice", "tenant/1", "tenant|1"]
    keys = {subject_secret(RUNTIME, s) for s in subjects}
    assert len(keys) == len(subjects)


def test_while_rotating_every_runtime_secret_derives_a_key_and_all_sign_newest_first() -> None:
    # Given the Runtime holds the new and the old secret (new first)
    keys = signing_secrets([NEWER, RUNTIME], "alice", "per-subject")
    # Then alice has two keys, the new one first
    assert keys == [subject_secret(NEWER, "alice"), subject_secret(RUNTIME, "alice")]
    # And a delivery signed with both (one `v1,` signature each) verifies with either key alone
    signed = signature(keys)
    assert len(signed.split(" ")) == 2 and all(part.startswith("v1,") for part in signed.split(" "))
    assert verifies(keys[0], signed) and verifies(keys[1], signed)
    # And with neither of bob's
    assert not any(verifies(key, signed) for key in signing_secrets([NEWER, RUNTIME], "bob", "per-subject"))


def test_the_shared_mode_signs_with_the_runtime_secrets_themselves() -> None:
    # Given a single-tenant deployment (PushSigning=shared), whose secret is stored bare
    keys = PushSigningKeys(lambda: [NEWER.removeprefix("whsec_"), RUNTIME], "shared")
    # Then every subject gets the Runtime secrets, as "whsec_…"
    assert keys.for_subject("alice") == keys.for_subject("bob") == [NEWER, RUNTIME]
