"""Push notifications (Profile v2): delivered at least once, signed with Standard Webhooks, to hosts the
Runtime allows, retried for up to 24 hours (shrunk to seconds here). Receivers are real HTTP servers on
loopback that verify every request with the `standardwebhooks` package."""

from __future__ import annotations

import base64
import json
import secrets
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from conftest import ALICE, auth, rpc, user_message
from nylorun.adapters.webhooks import AddressRefused, WebhookSender
from nylorun.domain.signing import subject_secret
from nylorun.domain.urls import PushUrlRejected, check_push_url
from nylorun.engine import Agent, Skill, Turn
from nylorun.ports import StoredPushConfig
from nylorun.protocol.models import TaskPushNotificationConfig
from nylorun.service.push import Delivery, Outcome, PushService
from nylorun.settings import Settings
from nylorun_local.runtime import LocalRuntime
from webhook_receiver import Receiver, own_secrets

INTERACTIONS = "https://docs.nylorun.com/a2a/interactions/v1"


@pytest.fixture()
def receiver(local_runtime: LocalRuntime) -> Iterator[Receiver]:
    made = Receiver(own_secrets(local_runtime.base_url, ALICE))
    yield made
    made.close()


@pytest.fixture(scope="module")
def approver(local_runtime: LocalRuntime) -> str:
    agent = Agent(name="t-push", description="asks for an approval", skills=[Skill(id="t", name="t", description="t", tags=["t"])])

    @agent.turn
    def run(turn: Turn) -> None:
        if turn.text.startswith("ask") and not turn.approval("Go?"):
            turn.reply("stopped")
            return
        turn.reply("done")

    local_runtime.add_agent(agent)
    return local_runtime.agent_url("t-push")


def send_with_push(url: str, text: str, hook: str, **push: Any) -> dict[str, Any]:
    config = {"url": hook, "authentication": {"scheme": "Bearer", "credentials": "hook-secret"}, "token": "tok-1", **push}
    params = {"message": user_message(text), "configuration": {"taskPushNotificationConfig": config}}
    answer = rpc(url, "SendMessage", params, headers=auth(**{"A2A-Extensions": INTERACTIONS}))
    return dict(answer["result"]["task"])


def states(requests: list[dict[str, Any]]) -> list[str]:
    return [r["body"]["statusUpdate"]["status"]["state"] for r in requests if "statusUpdate" in r["body"]]


def test_an_approval_turn_pushes_signed_updates_in_order(approver: str, receiver: Receiver) -> None:
    # Given a turn registered for push that waits for an approval
    task = send_with_push(approver, "ask", receiver.url)
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    iid = task["status"]["message"]["metadata"][INTERACTIONS]["interactionId"]
    receiver.wait(2)
    # When it is approved
    answer = user_message(
        "ok", taskId=task["id"], extensions=[INTERACTIONS], metadata={INTERACTIONS: {"interactionId": iid, "approved": True}}
    )
    rpc(approver, "SendMessage", {"message": answer})
    requests = receiver.wait(4)
    # Then WORKING, AUTH_REQUIRED, WORKING, COMPLETED arrive in that order, each signed and authorized
    assert states(requests) == ["TASK_STATE_WORKING", "TASK_STATE_AUTH_REQUIRED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    assert all(r["verified"] for r in requests)
    assert {r["headers"]["Authorization"] for r in requests} == {"Bearer hook-secret"}
    assert {r["headers"]["X-A2A-Notification-Token"] for r in requests} == {"tok-1"}
    assert len({r["headers"]["webhook-id"] for r in requests}) == 4
    assert all(r["body"]["statusUpdate"]["taskId"] == task["id"] for r in requests)
    # And the interaction is shown, as its creator activated interactions/v1
    auth_required = requests[1]["body"]["statusUpdate"]["status"]["message"]
    assert auth_required["metadata"][INTERACTIONS]["kind"] == "approval"


def test_a_receiver_that_recovers_gets_the_delivery_with_the_same_webhook_id(approver: str, local_runtime: LocalRuntime) -> None:
    # Given a receiver that fails twice (500, then 503 with Retry-After) and then recovers
    flaky = Receiver(own_secrets(local_runtime.base_url, ALICE), lambda n: [(500, {}), (503, {"Retry-After": "1"})][n - 1] if n <= 2 else (200, {}))
    try:
        send_with_push(approver, "quick", flaky.url)
        requests = flaky.wait(4, timeout=30)
        # Then the first delivery (WORKING) was retried until it went through, same webhook-id each time
        first_ids = [r["headers"]["webhook-id"] for r in requests[:3]]
        assert len(set(first_ids)) == 1
        assert all(r["verified"] for r in requests)
        # And the later update still arrived after it, in order
        assert states(requests)[2:] == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    finally:
        flaky.close()


def test_a_receiver_that_keeps_failing_ends_in_the_dead_letter_queue(approver: str, local_runtime: LocalRuntime) -> None:
    dead = Receiver(own_secrets(local_runtime.base_url, ALICE), lambda n: (500, {}))
    sqs = local_runtime.aws.client("sqs")
    try:
        task = send_with_push(approver, "quick", dead.url)
        # When it fails past the (shrunk: 6 s) retry window
        found: list[dict[str, Any]] = []
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not found:
            for message in sqs.receive_message(QueueUrl=local_runtime.stack.push_dlq_url, MaxNumberOfMessages=10).get("Messages", []):
                body = json.loads(message["Body"])
                if body["delivery"]["task_id"] == task["id"]:
                    found.append(body)
            time.sleep(0.2)
        # Then the delivery is dead-lettered, with its reason and without any credential
        assert found, "dead-lettered"
        assert "retry window" in found[0]["reason"]
        assert "hook-secret" not in json.dumps(found)
        assert len(dead.requests) >= 2
    finally:
        dead.close()


def test_410_gone_disables_the_config(approver: str, local_runtime: LocalRuntime) -> None:
    gone = Receiver(own_secrets(local_runtime.base_url, ALICE), lambda n: (410, {}))
    try:
        task = send_with_push(approver, "quick", gone.url, id="cfg-gone")
        gone.wait(1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = rpc(approver, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg-gone"})
            if "error" in found:
                break
            time.sleep(0.1)
        # Then the config is gone and nothing more is sent to it
        assert found["error"]["code"] == -32001
        time.sleep(1.0)
        assert len(gone.requests) == 1
    finally:
        gone.close()


# ---------------------------------------------------------------- SSRF
@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.5/hook",
        "https://172.16.3.4/hook",
        "https://192.168.1.10/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[fd00::1]/hook",
        "http://example.com/hook",  # plain http only to the local allow-list
        "https://user:pw@example.com/hook",
    ],
)
def test_push_urls_to_non_public_hosts_are_refused(approver: str, url: str, table_items: Callable[[], list]) -> None:
    task = rpc(approver, "SendMessage", {"message": user_message("quick")})["result"]["task"]
    before = table_items()
    answer = rpc(approver, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": url})
    assert answer["error"]["code"] == -32602
    assert table_items() == before


@pytest.mark.parametrize("url", ["https://127.0.0.1/hook", "http://127.0.0.1:8080/hook", "https://[::1]/hook"])
def test_loopback_urls_are_refused_where_loopback_is_not_allowed(url: str) -> None:
    # Given the deployed defaults (no plain-http hosts; loopback is only allowed by the local Runtime)
    settings = Settings()
    # Then a config naming loopback is refused
    with pytest.raises(PushUrlRejected):
        check_push_url(url, allowed_hosts=settings.push_allowed_hosts, http_hosts=settings.push_http_hosts)


def test_a_host_resolving_to_a_private_address_is_never_contacted() -> None:
    # Given a name that resolves to private and link-local addresses, and loopback not allowed
    sender = WebhookSender(timeout_seconds=2, resolver=lambda host, port: ["10.1.2.3", "169.254.169.254"])
    # When a delivery is attempted: refused before any connection
    with pytest.raises(AddressRefused):
        sender.post("https://hooks.example.com/x", b"{}", {})
    # And loopback, when not allowed, too (localhost resolves to 127.0.0.1 / ::1)
    with pytest.raises(AddressRefused):
        WebhookSender(timeout_seconds=2).post("http://localhost:9/x", b"{}", {})


def test_a_redirect_is_not_followed(local_runtime: LocalRuntime) -> None:
    # Given a receiver that redirects to a private address
    redirecting = Receiver(own_secrets(local_runtime.base_url, ALICE), lambda n: (302, {"Location": "http://10.0.0.1/steal"}))
    sender = WebhookSender(timeout_seconds=2, allow_loopback=True)
    try:
        result = sender.post(redirecting.url, b"{}", {"Content-Type": "application/json"})
        # Then the 302 is the answer: nothing followed it
        assert result.status == 302
        assert len(redirecting.requests) == 1
    finally:
        redirecting.close()


# ---------------------------------------------------------------- rotation and lifetime
class _Queue:
    def __init__(self) -> None:
        self.dead: list[tuple[Delivery, str]] = []

    def send_deliveries(self, deliveries: Sequence[Delivery]) -> None:  # pragma: no cover - fan-out not used here
        raise AssertionError

    def send_fan_out(self, task_id: str, event_id: str, event: dict[str, Any]) -> None:  # pragma: no cover
        raise AssertionError

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        self.dead.append((delivery, reason))


def _secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def test_during_a_rotation_receivers_holding_either_secret_verify(local_runtime: LocalRuntime) -> None:
    old, new = _secret(), _secret()
    store = local_runtime.runtime.store
    task_id = f"rot-{uuid.uuid4()}"
    # Each receiver holds alice's key derived from one of the two Runtime secrets (what the endpoint hands out)
    holders = [Receiver(subject_secret(old, "alice")), Receiver(subject_secret(new, "alice"))]
    try:
        for index, receiver in enumerate(holders):
            store.put_push_config(task_id, StoredPushConfig(config=TaskPushNotificationConfig(id=f"c{index}", task_id=task_id, url=receiver.url), created_at="2026-01-01T00:00:00.000Z", subject="alice"))
        # Given the Runtime signs with the new and the old secret
        push = PushService(store, WebhookSender(timeout_seconds=2, allow_loopback=True), _Queue(), Settings(), lambda: [new, old])
        for index in range(2):
            delivery = Delivery(event_id="e1", task_id=task_id, config_id=f"c{index}", kind="statusUpdate",
                                payload={"taskId": task_id, "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}},
                                first_attempt_at=time.time())
            assert push.deliver(delivery, 1).outcome is Outcome.DELIVERED
        # Then each receiver verified with the one secret it holds
        assert [r.requests[0]["verified"] for r in holders] == [True, True]
        assert len(holders[0].requests[0]["headers"]["webhook-signature"].split(" ")) == 2
    finally:
        for receiver in holders:
            receiver.close()


def test_configs_live_as_long_as_their_task(approver: str, receiver: Receiver, local_runtime: LocalRuntime) -> None:
    store = local_runtime.runtime.store
    # Given a finished task with a push config
    task = send_with_push(approver, "quick", receiver.url, id="cfg-life")
    receiver.wait(2)
    # Then its config carries an expiry (TTL) once the task has ended
    deadline = time.monotonic() + 10
    item: dict[str, Any] = {}
    while time.monotonic() < deadline and "expiresAt" not in item:
        item = local_runtime.aws.client("dynamodb").get_item(
            TableName=local_runtime.stack.table_name, Key={"PK": {"S": f"PUSH#{task['id']}"}, "SK": {"S": "CFG#cfg-life"}}
        ).get("Item", {})
        time.sleep(0.1)
    assert int(item["expiresAt"]["N"]) > time.time()
    # And a config whose task no longer exists is swept
    orphan = f"gone-{uuid.uuid4()}"
    store.put_push_config(orphan, StoredPushConfig(config=TaskPushNotificationConfig(id="x", task_id=orphan, url=receiver.url), created_at="2026-01-01T00:00:00.000Z"))
    assert store.sweep_push_configs() >= 1
    assert store.get_push_config(orphan, "x") is None
    assert store.get_push_config(task["id"], "cfg-life") is not None


def test_a_config_on_an_ended_task_is_accepted_sends_nothing_and_expires(
    approver: str, receiver: Receiver, local_runtime: LocalRuntime
) -> None:
    # Given a task that has ended, and whose last event has been delivered (to a first config): nothing of
    # it is still on its way through the stream, the bus and the push queue
    first = Receiver(own_secrets(local_runtime.base_url, ALICE))
    try:
        task = send_with_push(approver, "quick", first.url)
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        deadline = time.monotonic() + 20
        while "TASK_STATE_COMPLETED" not in states(first.requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "TASK_STATE_COMPLETED" in states(first.requests)
    finally:
        first.close()
    # When a push config is created on it
    created = rpc(approver, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": "late", "url": receiver.url})
    # Then it is accepted and readable, and carries an expiry from the start (it will never send anything)
    assert created["result"]["id"] == "late", created
    assert rpc(approver, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "late"})["result"]["url"] == receiver.url
    item = local_runtime.aws.client("dynamodb").get_item(
        TableName=local_runtime.stack.table_name, Key={"PK": {"S": f"PUSH#{task['id']}"}, "SK": {"S": "CFG#late"}}
    )["Item"]
    task_item = local_runtime.aws.client("dynamodb").get_item(
        TableName=local_runtime.stack.table_name, Key={"PK": {"S": f"TASK#{task['id']}"}, "SK": {"S": "TASK"}}
    )["Item"]
    assert item["expiresAt"] == task_item["expiresAt"]  # it expires with its task (decision 0020)
    assert receiver.wait(1, timeout=2) == []
