"""The push secret is read through Powertools Parameters with a max age (docs/deploy.md, "Rotate the push secret"):
a rotated value in Secrets Manager signs a warm push function's deliveries once the cached value is older than
`NYLORUN_PUSH_SECRET_MAX_AGE_SECONDS`, and not before (one GetSecretValue per max age, not one per delivery).

The secrets come from the wiring (`Runtime.push_secrets`, as the push function builds them) against Secrets
Manager on the local stack's moto server; a receiver's check is `standardwebhooks` verifying each signed POST.
The broken copy reads the secret once, as the push function did before: it still signs with the old value.
"""

from __future__ import annotations

import base64
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from nylorun.domain.signing import subject_secret
from nylorun.ports import HttpResult, SigningSecrets, StoredPushConfig
from nylorun.protocol.models import TaskPushNotificationConfig
from nylorun.service.push import Delivery, Outcome, PushService
from nylorun.wiring import Runtime
from nylorun_local.runtime import LocalRuntime
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

pytestmark = pytest.mark.integration


class Sender:
    """Records each signed POST and answers 200 (the signature is what this test is about, not HTTP)."""

    def __init__(self) -> None:
        self.posts: list[tuple[bytes, dict[str, str]]] = []

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout_seconds: float | None = None) -> HttpResult:
        self.posts.append((body, headers))
        return HttpResult(200, {})


def whsec() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode()


def verifies(post: tuple[bytes, dict[str, str]], secret: str) -> bool:
    """What alice's receiver, holding her key derived from this Runtime secret, concludes about one
    of her deliveries."""
    try:
        Webhook(subject_secret(secret, "alice")).verify(post[0], post[1])
    except WebhookVerificationError:
        return False
    return True


def as_wired(source: SigningSecrets) -> SigningSecrets:
    return source


def read_once(source: SigningSecrets) -> SigningSecrets:
    """The push function without a max age: the value read when the service was made, kept for the container's
    life."""
    value = source()
    return lambda: value


OLD, NEW = whsec(), whsec()


@dataclass
class Rotation:
    push: PushService
    sender: Sender
    rotate: Callable[[str], None]  # stores a new value in Secrets Manager
    delivery: Callable[[], Delivery]  # a new delivery to the stored push config


Wire = Callable[[SigningSecrets], SigningSecrets]


@pytest.fixture()
def rotation(local_runtime: LocalRuntime) -> Callable[[int, Wire], Rotation]:
    """`rotation(max_age, wire)`: a secret in Secrets Manager holding OLD and a push service whose secrets are
    the wiring's with that max age (passed through `wire`), delivering to a stored push config."""
    assert local_runtime.runtime is not None
    base = local_runtime.runtime
    client = local_runtime.aws.client("secretsmanager")
    task_id = f"rotation-{uuid.uuid4()}"
    config = TaskPushNotificationConfig(id="c1", task_id=task_id, url="https://hooks.example.com/rotation")
    base.store.put_push_config(task_id, StoredPushConfig(config=config, created_at="2026-01-01T00:00:00.000Z", subject="alice"))

    def make(max_age: int, wire: Wire) -> Rotation:
        arn = client.create_secret(Name=f"push-{uuid.uuid4().hex}", SecretString=OLD)["ARN"]
        settings = base.settings.model_copy(
            update={"push_secret": None, "push_secret_arn": arn, "push_secret_max_age_seconds": max_age}
        )
        runtime = Runtime(settings=settings, registry=base.registry)
        sender = Sender()
        push = PushService(runtime.store, sender, runtime.push_queue, settings, wire(runtime.push_secrets()))
        return Rotation(
            push,
            sender,
            rotate=lambda new: client.put_secret_value(SecretId=arn, SecretString=new),
            delivery=lambda: Delivery(
                event_id=f"e-{uuid.uuid4()}", task_id=task_id, config_id="c1", kind="statusUpdate",
                payload={"taskId": task_id, "contextId": "ctx", "status": {"state": "TASK_STATE_WORKING"}},
                first_attempt_at=time.time(),
            ),
        )

    return make


def test_within_the_max_age_a_warm_instance_keeps_signing_with_the_value_it_read(
    rotation: Callable[[int, Wire], Rotation],
) -> None:
    # Given a push service wired to Secrets Manager with the default max age (5 minutes), having signed once
    r = rotation(300, as_wired)
    assert r.push.deliver(r.delivery(), 1).outcome is Outcome.DELIVERED
    # When the secret is rotated, and the next delivery goes out at once
    r.rotate(NEW)
    assert r.push.deliver(r.delivery(), 1).outcome is Outcome.DELIVERED
    # Then both were signed with the value read first (cached), which receivers holding the old secret verify
    assert [verifies(post, OLD) for post in r.sender.posts] == [True, True]
    assert [verifies(post, NEW) for post in r.sender.posts] == [False, False]


@pytest.mark.parametrize(
    ("wire", "signs_with_new"), [(as_wired, True), (read_once, False)], ids=["as wired", "read once (broken copy)"]
)
def test_after_the_max_age_the_next_delivery_is_signed_with_the_rotated_secret(
    rotation: Callable[[int, Wire], Rotation], wire: Wire, signs_with_new: bool
) -> None:
    # Given a push service wired to Secrets Manager with a 1 s max age, having signed with the old secret
    r = rotation(1, wire)
    assert r.push.deliver(r.delivery(), 1).outcome is Outcome.DELIVERED
    assert verifies(r.sender.posts[0], OLD)
    # When the secret is rotated to a new value alone, and the cached value grows older than the max age
    r.rotate(NEW)
    time.sleep(1.2)
    assert r.push.deliver(r.delivery(), 1).outcome is Outcome.DELIVERED
    # Then the next delivery is signed with the new secret only (the broken copy still signs with the old one)
    assert verifies(r.sender.posts[1], NEW) is signs_with_new
    assert verifies(r.sender.posts[1], OLD) is not signs_with_new


def test_the_keys_a_caller_is_handed_follow_the_rotation(local_runtime: LocalRuntime) -> None:
    # Given the api's wiring (what GET /v1/a2a/push-signing-secrets answers) reading Secrets Manager, max age 1 s
    assert local_runtime.runtime is not None
    base = local_runtime.runtime
    client = local_runtime.aws.client("secretsmanager")
    arn = client.create_secret(Name=f"push-{uuid.uuid4().hex}", SecretString=OLD)["ARN"]
    settings = base.settings.model_copy(
        update={"push_secret": None, "push_secret_arn": arn, "push_secret_max_age_seconds": 1}
    )
    keys = Runtime(settings=settings, registry=base.registry).signing_keys
    assert keys is not None
    assert keys.for_subject("alice") == [subject_secret(OLD, "alice")]
    # When the secret holds the new and the old value (docs/deploy.md#rotate-the-push-secret, its first step)
    client.put_secret_value(SecretId=arn, SecretString=f"{NEW} {OLD}")
    time.sleep(1.2)
    # Then alice is handed both of her keys, the new one first; then, with the new value alone, only the new key
    assert keys.for_subject("alice") == [subject_secret(NEW, "alice"), subject_secret(OLD, "alice")]
    client.put_secret_value(SecretId=arn, SecretString=NEW)
    time.sleep(1.2)
    assert keys.for_subject("alice") == [subject_secret(NEW, "alice")]


def test_the_api_makes_no_secrets_manager_client_until_a_caller_asks_for_its_keys(
    local_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a Runtime whose push secret is in Secrets Manager, its clients watched as they are made
    assert local_runtime.runtime is not None
    base = local_runtime.runtime
    arn = local_runtime.aws.client("secretsmanager").create_secret(Name=f"push-{uuid.uuid4().hex}", SecretString=OLD)["ARN"]
    settings = base.settings.model_copy(update={"push_secret": None, "push_secret_arn": arn})
    runtime = Runtime(settings=settings, registry=base.registry)
    made: list[Any] = []
    client = runtime.client
    monkeypatch.setattr(runtime, "client", lambda name: made.append(client(name)) or made[-1])
    # When the api's signing keys are wired (as the api function does when its module loads)
    keys = runtime.signing_keys
    assert keys is not None
    # Then no Secrets Manager client exists yet (making one is ~50 ms of a cold start no request needs but one)
    assert made and all(lazy._client is None for lazy in made)
    # And the first caller who asks gets keys derived from the stored secret, the client made then
    assert keys.for_subject("alice") == [subject_secret(OLD, "alice")]
    assert made[0]._client is not None
