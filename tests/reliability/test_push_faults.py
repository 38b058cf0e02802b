"""Push delivery under faults: a receiver that is down and then comes up, a receiver slower than the push
timeout, and a receiver that is gone (410). Receivers are the end-to-end suite's real webhook servers on
loopback (they verify every Standard Webhooks signature). Push retries are shrunk to ~1 s by conftest.

The dead-letter queue after the retry window is covered end to end in tests/e2e/test_push.py.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from nylorun.ports import StoredPushConfig
from nylorun.protocol.models import TaskPushNotificationConfig, now_timestamp
from nylorun.service.push import Delivery, Outcome
from nylorun.wiring import Runtime
from nylorun_local.aws import free_port
from nylorun_local.runtime import LocalRuntime
from reliability_kit import ALICE, Receiver, own_secrets, poll, rpc, user_message

pytestmark = pytest.mark.e2e


def receiver_on(port: int, secret: list[str], answers: Any = None) -> Receiver:
    """The e2e Receiver, listening on a port chosen in advance (it normally takes any free port)."""
    return Receiver(secret, answers, port=port)


class Attempts:
    """Watches the push function's outbound POSTs (it changes nothing): which URL, which webhook-id, and
    whether the connection failed."""

    def __init__(self, post: Any) -> None:
        self._post = post
        self.seen: list[dict[str, Any]] = []

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout_seconds: float | None = None) -> Any:
        try:
            result = self._post(url, body, headers)
        except Exception as exc:
            self.seen.append({"url": url, "webhook-id": headers["webhook-id"], "failed": type(exc).__name__})
            raise
        self.seen.append({"url": url, "webhook-id": headers["webhook-id"], "status": result.status})
        return result

    def failed(self, url: str) -> list[dict[str, Any]]:
        return [a for a in self.seen if a["url"] == url and "failed" in a]


@pytest.fixture()
def attempts(local_runtime: LocalRuntime) -> Iterator[Attempts]:
    sender = local_runtime._functions["PushFunction"].runtime.http
    watcher = Attempts(sender.post)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sender, "post", watcher.post)
        yield watcher


def states(requests: list[dict[str, Any]]) -> list[str]:
    return [r["body"]["statusUpdate"]["status"]["state"] for r in requests if "statusUpdate" in r["body"]]


def test_a_receiver_that_is_down_then_comes_up_gets_every_update_in_order(
    local_runtime: LocalRuntime, attempts: Attempts
) -> None:
    # Given a push config for a port where nothing listens yet
    port = free_port()
    hook = f"http://127.0.0.1:{port}/hook"
    url = local_runtime.agent_url("echo")
    config = {"id": "cfg-down-up", "url": hook, "token": "tok-down-up"}
    params = {"message": user_message("push me"), "configuration": {"taskPushNotificationConfig": config}}
    task = rpc(url, "SendMessage", params)["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    failed = poll(lambda: attempts.failed(hook), bool, timeout=20)
    assert failed, "the first delivery attempt could not connect"
    # When the receiver comes up on that port
    receiver = receiver_on(port, own_secrets(local_runtime.base_url, ALICE))
    try:
        requests = receiver.wait(2, timeout=30)
        # Then it gets WORKING then COMPLETED, signed, the first with the webhook-id of the failed attempt
        assert states(requests) == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
        assert all(r["verified"] for r in requests)
        assert requests[0]["headers"]["webhook-id"] == failed[0]["webhook-id"]
        assert {r["headers"]["X-A2A-Notification-Token"] for r in requests} == {"tok-down-up"}
        assert all(r["body"]["statusUpdate"]["taskId"] == task["id"] for r in requests)
        # And the config is still there (a refused connection is retried, not a reason to drop it)
        kept = rpc(url, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg-down-up"})
        assert kept["result"]["url"] == hook
    finally:
        receiver.close()


@pytest.fixture()
def push_config(local_runtime: LocalRuntime) -> Iterator[Any]:
    """A push config in the Runtime's table, for a task id of its own, pointing where the test says."""
    assert local_runtime.runtime is not None
    store = local_runtime.runtime.store
    task_id = f"push-fault-{uuid.uuid4()}"

    def put(url: str) -> Delivery:
        config = TaskPushNotificationConfig(id="c1", task_id=task_id, url=url)
        store.put_push_config(task_id, StoredPushConfig(config=config, created_at=now_timestamp(), subject="alice"))
        return Delivery(
            event_id=f"evt-{uuid.uuid4()}",
            task_id=task_id,
            config_id="c1",
            kind="statusUpdate",
            payload={"taskId": task_id, "contextId": "ctx", "status": {"state": "TASK_STATE_WORKING"}},
            first_attempt_at=time.time(),
        )

    yield put
    store.delete_push_config(task_id, "c1")


def test_a_receiver_slower_than_the_push_timeout_is_retried(local_runtime: LocalRuntime, push_config: Any) -> None:
    # Given a Runtime whose push timeout is 1 s, and a receiver that takes 2 s to answer the first time
    assert local_runtime.runtime is not None
    settings = local_runtime.runtime.settings.model_copy(update={"push_timeout_seconds": 1})
    push = Runtime(settings=settings, registry=local_runtime.runtime.registry).push
    slow = Receiver(own_secrets(local_runtime.base_url, ALICE), lambda n: (time.sleep(2), (200, {}))[1] if n == 1 else (200, {}))
    try:
        delivery = push_config(slow.url)
        # When the delivery is attempted
        first = push.deliver(delivery, 1)
        # Then it is not counted as delivered: it will be retried, after a delay
        assert first.outcome is Outcome.RETRY, first
        assert first.delay_seconds >= 1
        # And the retry (the receiver answers in time now) is delivered with the same webhook-id
        second = push.deliver(delivery, 2)
        assert second.outcome is Outcome.DELIVERED, second
        requests = slow.wait(2)
        assert [r["headers"]["webhook-id"] for r in requests] == [delivery.webhook_id] * 2
    finally:
        slow.close()


def test_a_gone_receiver_disables_its_config_and_gets_nothing_more(local_runtime: LocalRuntime, push_config: Any) -> None:
    # Given a receiver that answers 410 Gone
    assert local_runtime.runtime is not None
    gone = Receiver(own_secrets(local_runtime.base_url, ALICE), lambda n: (410, {}))
    try:
        delivery = push_config(gone.url)
        # When one delivery meets the 410, and a later one for the same config follows
        first = local_runtime.runtime.push.deliver(delivery, 1)
        later = local_runtime.runtime.push.deliver(delivery, 1)
        # Then the config is removed, and the later delivery is dropped without contacting the receiver
        assert (first.outcome, later.outcome) == (Outcome.DISABLED, Outcome.DROPPED)
        assert local_runtime.runtime.store.get_push_config(delivery.task_id, "c1") is None
        assert len(gone.requests) == 1
    finally:
        gone.close()


@pytest.mark.parametrize(
    "retry_after",
    [
        # Latin-1 digits Python calls digits: a header's bytes are read as Latin-1, so these are what can arrive
        # (an Arabic-Indic or full-width number arrives as other characters, not digits).
        pytest.param("²", id="superscript two"),
        pytest.param("¹²³", id="superscript 123"),
        pytest.param("1²", id="one and a superscript two"),
    ],
)
def test_a_retry_after_that_is_not_ascii_digits_or_a_date_gets_the_normal_backoff(
    local_runtime: LocalRuntime, push_config: Any, retry_after: str
) -> None:
    # Given a receiver that answers 503 with a Retry-After that HTTP does not allow (RFC 9110: digits are ASCII)
    assert local_runtime.runtime is not None
    busy = Receiver(own_secrets(local_runtime.base_url, ALICE), lambda n: (503, {"Retry-After": retry_after}))
    try:
        delivery = push_config(busy.url)
        # When a delivery meets it
        result = local_runtime.runtime.push.deliver(delivery, 1)
        # Then the delivery is retried on its own backoff: the header neither breaks the push function nor sets the
        # wait (before Retry-After was read strictly each raised: str.isdigit() says yes, int() says no;
        # docs/decisions/0017-retry-after-strict.md)
        settings = local_runtime.runtime.settings
        assert result.outcome is Outcome.RETRY, result
        assert 1 <= result.delay_seconds <= max(1, settings.push_retry_base_seconds), result
        assert len(busy.requests) == 1
    finally:
        busy.close()


def test_a_retry_after_too_long_for_an_integer_waits_the_longest_a_retry_can(
    local_runtime: LocalRuntime, push_config: Any
) -> None:
    # Given a receiver that asks for a wait of 5,000 digits (more than Python turns into an integer)
    assert local_runtime.runtime is not None
    busy = Receiver(own_secrets(local_runtime.base_url, ALICE), lambda n: (503, {"Retry-After": "9" * 5000}))
    try:
        delivery = push_config(busy.url)
        # When a delivery meets it
        result = local_runtime.runtime.push.deliver(delivery, 1)
        # Then it waits as long as one retry can (12 hours, SQS's longest visibility timeout), instead of raising
        assert result.outcome is Outcome.RETRY, result
        assert result.delay_seconds == 43_200, result
    finally:
        busy.close()
