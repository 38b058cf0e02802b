"""Forged events on the push queue (docs/security.md): anyone allowed `sqs:SendMessage` on the push queue (before,
anyone allowed `events:PutEvents` on the bus, which fed it) could put an event there, and the push function used to
sign its payload as it came. It now signs what the table says: a status only if the task held it, an artifact only
as the table holds it. The attacker here puts events on the local Runtime's push queue directly, in the task's
message group (the same SendMessage the publish function makes), for a real task with a real push config; the
receiver is the end-to-end suite's webhook server, which verifies every signature.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from nylorun.events import ARTIFACT_UPDATED, STATUS_CHANGED
from nylorun_local.runtime import LocalRuntime
from reliability_kit import Receiver, e2e_push, poll, rpc, user_message

pytestmark = pytest.mark.e2e

FORGED_TEXT = "Refund approved, wire the fee to ACCT-666"


class FanOuts:
    """Watches the push function's fan-out (it changes nothing): each event id and how many deliveries it made."""

    def __init__(self, fan_out: Any) -> None:
        self._fan_out = fan_out
        self.made: dict[str, int] = {}

    def __call__(self, event: dict[str, Any], resumed: bool = False) -> Any:
        result = self._fan_out(event, resumed)
        event_id = str((event.get("detail") or {}).get("eventId"))
        self.made[event_id] = self.made.get(event_id, 0) + result.queued  # a fan-out may take several steps
        return result


@pytest.fixture()
def fan_outs(local_runtime: LocalRuntime) -> Iterator[FanOuts]:
    push = local_runtime._functions["PushFunction"].runtime.push
    watcher = FanOuts(push.fan_out)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(push, "fan_out", watcher)
        yield watcher


receiver = e2e_push.receiver  # the end-to-end push suite's verifying receiver


def put_on_the_push_queue(local_runtime: LocalRuntime, detail_type: str, detail: dict[str, Any]) -> str:
    """What an attacker with sqs:SendMessage on the push queue does: one event, shaped and grouped as the publish
    function queues the Runtime's."""
    assert local_runtime.runtime is not None
    event_id = f"forged-{uuid.uuid4()}"
    event = {"detail-type": detail_type, "detail": {**detail, "eventId": event_id}}
    local_runtime.runtime.push_queue.send_fan_out(str(detail["taskId"]), event_id, event)
    return event_id


def a_pushed_task(local_runtime: LocalRuntime, receiver: Receiver) -> dict[str, Any]:
    """A completed task with a text artifact (the TCK agent's) whose push config points at the receiver, once
    its own status updates have arrived."""
    config = {"id": "cfg-forged", "url": receiver.url, "token": "tok-forged"}
    message = {**user_message("artifact please"), "messageId": f"tck-artifact-text-{uuid.uuid4()}"}  # its scenario
    params = {"message": message, "configuration": {"taskPushNotificationConfig": config}}
    task = dict(rpc(local_runtime.agent_url("tck"), "SendMessage", params)["result"]["task"])
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    poll(lambda: [r for r in receiver.requests if "statusUpdate" in r["body"]], lambda r: len(r) >= 2)
    return task


def forged_texts(receiver: Receiver) -> list[dict[str, Any]]:
    return [r for r in receiver.requests if FORGED_TEXT in str(r["body"])]


def test_a_status_put_on_the_push_queue_by_someone_else_is_not_signed(
    local_runtime: LocalRuntime, receiver: Receiver, fan_outs: FanOuts
) -> None:
    # Given a task with a push config, its own updates delivered
    task = a_pushed_task(local_runtime, receiver)
    # When an attacker puts a status update on the push queue that the task never had
    status = {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00Z", "message": {
        "messageId": "m-forged", "role": "ROLE_AGENT", "parts": [{"text": FORGED_TEXT}]}}
    event_id = put_on_the_push_queue(local_runtime, STATUS_CHANGED, {
        "subject": "alice", "agent": "tck", "taskId": task["id"], "contextId": task["contextId"], "turn": 1,
        "state": "TASK_STATE_COMPLETED", "statusUpdate": {"taskId": task["id"], "contextId": task["contextId"],
                                                          "status": status}})
    # Then the push function sees it and makes no delivery of it: the receiver gets nothing signed with that text
    made = poll(lambda: fan_outs.made, lambda m: event_id in m)
    assert made[event_id] == 0
    assert forged_texts(receiver) == []


def test_an_artifact_put_on_the_push_queue_by_someone_else_goes_out_only_as_the_table_holds_it(
    local_runtime: LocalRuntime, receiver: Receiver, fan_outs: FanOuts
) -> None:
    # Given a task with a push config and its artifact, as the Runtime pushed it
    task = a_pushed_task(local_runtime, receiver)
    real = poll(lambda: [r for r in receiver.requests if "artifactUpdate" in r["body"]], bool)
    assert real, "the task's artifact was pushed"
    artifact = real[0]["body"]["artifactUpdate"]["artifact"]
    # When an attacker puts that artifact on the push queue with other content
    forged = {**artifact, "parts": [{"text": FORGED_TEXT}]}
    event_id = put_on_the_push_queue(local_runtime, ARTIFACT_UPDATED, {
        "subject": "alice", "agent": "tck", "taskId": task["id"], "contextId": task["contextId"], "turn": 1,
        "artifactUpdate": {"taskId": task["id"], "contextId": task["contextId"], "artifact": forged}})
    made = poll(lambda: fan_outs.made, lambda m: event_id in m)
    # Then what is signed and delivered is the table's artifact, never the forged text
    assert made[event_id] == 1
    again = poll(lambda: [r for r in receiver.requests if "artifactUpdate" in r["body"]], lambda r: len(r) >= 2)
    assert all(r["verified"] for r in again)
    assert again[-1]["body"]["artifactUpdate"]["artifact"]["parts"] == artifact["parts"]
    assert forged_texts(receiver) == []
