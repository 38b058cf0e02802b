"""Dead letters (docs/operate.md): `nylorun admin dlq` lists the context and push queues' dead letters with their tasks,
`nylorun admin redrive` moves them back, and the queued turn then runs, the push delivery is then delivered. Both
through the CLI (`nylorun admin --local PORT`, in-process), against the local Runtime's real queues."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from unittest import mock

import pytest
from conftest import ALICE, rpc, user_message
from nylorun.engine import Agent, Skill, Turn
from nylorun.ports import TaskStatus
from nylorun.protocol.models import TaskState
from nylorun_client.command import main
from nylorun_local.aws import free_port
from nylorun_local.runtime import LocalRuntime
from webhook_receiver import Receiver, own_secrets

pytestmark = pytest.mark.e2e

SKILL = [Skill(id="t", name="t", description="test", tags=["test"])]
T = TypeVar("T")


def poll(read: Callable[[], T], done: Callable[[T], bool], timeout: float) -> T:
    """What `read` gives once `done` says so, or when `timeout` s have passed (for the caller to assert on)."""
    deadline = time.monotonic() + timeout
    while not done(value := read()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return value


@pytest.fixture(scope="module")
def waits(local_runtime: LocalRuntime) -> str:
    agent = Agent(name="t-dlq", description="waits for an approval when asked", skills=SKILL)

    @agent.turn
    def run(turn: Turn) -> None:
        if turn.text.startswith("ask"):
            turn.approval("ok?")
        turn.reply(f"ran: {turn.text}")

    local_runtime.add_agent(agent)
    return local_runtime.agent_url("t-dlq")


def admin(local_runtime: LocalRuntime, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """`nylorun admin --local PORT ARGS` as an operator runs it: (exit code, stdout)."""
    capsys.readouterr()
    with mock.patch.dict(os.environ):  # the command points boto3 at the Runtime's stack: only for its own run
        code = main(["admin", "--local", str(local_runtime.options.port), *args])
    return code, capsys.readouterr().out


def dead_letters(local_runtime: LocalRuntime, capsys: pytest.CaptureFixture[str], queue: str, task_id: str) -> list[dict[str, Any]]:
    code, out = admin(local_runtime, capsys, "--json", "dlq", "--queue", queue)
    assert code == 0
    (look,) = json.loads(out)["queues"]
    return [letter for letter in look["letters"] if letter.get("taskId") == task_id]


@contextmanager
def receive_budget(local_runtime: LocalRuntime, count: int) -> Iterator[None]:
    """The context queue's redrive policy with a shrunk maxReceiveCount (1,000 deployed: ~10 days of looks)."""
    assert local_runtime.stack is not None
    sqs, url = local_runtime.aws.client("sqs"), local_runtime.stack.context_queue_url
    policy = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"]
    shrunk = {**json.loads(policy), "maxReceiveCount": count}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": json.dumps(shrunk)})
    try:
        yield
    finally:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})


def state_of(url: str, task_id: str) -> str:
    return str(rpc(url, "GetTask", {"id": task_id, "historyLength": 0})["result"]["status"]["state"])


def test_a_dead_lettered_queued_turn_is_listed_with_its_task_and_runs_once_redriven(
    local_runtime: LocalRuntime, waits: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert local_runtime.runtime is not None
    store, context = local_runtime.runtime.store, str(uuid.uuid4())
    # Given a turn waiting for an approval, and one queued behind it whose context stays busy past the context
    # queue's receives (shrunk to 2, one look each NYLORUN_DISPATCH_RETRY_SECONDS = 2 s)
    with receive_budget(local_runtime, 2):
        first = rpc(waits, "SendMessage", {"message": user_message("ask", contextId=context)})["result"]["task"]
        assert first["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
        queued = rpc(waits, "SendMessage", {"message": user_message("after", contextId=context),
                                            "configuration": {"returnImmediately": True}})["result"]["task"]  # fmt: skip
        assert queued["status"]["state"] == "TASK_STATE_SUBMITTED"
        # When its message is dead-lettered
        listed = poll(lambda: dead_letters(local_runtime, capsys, "context", queued["id"]), bool, timeout=40)
    # Then `admin dlq` lists it with its task: still SUBMITTED, its Agent and context
    (letter,) = listed
    assert letter["task"] == {"state": "TASK_STATE_SUBMITTED", "agent": "t-dlq", "contextId": context}
    assert letter["reason"] == "not started within the context queue's receives"
    # And the text output says the same to a person
    code, text = admin(local_runtime, capsys, "dlq", "--queue", "context")
    assert code == 0 and f"{letter['messageId']}  task {queued['id']}  SUBMITTED  agent t-dlq  context {context}" in text
    # And listing consumed nothing: it is still there, listed again
    assert [d["messageId"] for d in dead_letters(local_runtime, capsys, "context", queued["id"])] == [letter["messageId"]]

    # Given the turn ahead then ends but its hand-off to the queued turn is lost (the process died between the two)
    store.set_status(first["id"], TaskStatus(state=TaskState.CANCELED), expect={TaskState.AUTH_REQUIRED})
    # Then nothing starts the queued turn: its backstop message is dead-lettered
    stuck = poll(lambda: state_of(waits, queued["id"]), lambda s: s != "TASK_STATE_SUBMITTED", timeout=5)
    assert stuck == "TASK_STATE_SUBMITTED"

    # When the operator redrives another message id, nothing moves; then this dead letter, by its message id
    assert admin(local_runtime, capsys, "redrive", "--message", str(uuid.uuid4()))[1].strip() == "0 dead letters redriven"
    assert state_of(waits, queued["id"]) == "TASK_STATE_SUBMITTED"
    code, out = admin(local_runtime, capsys, "redrive", "--message", letter["messageId"])
    # Then it is moved back, the turn runs and completes
    assert code == 0 and out.splitlines()[-1] == "1 dead letter redriven", out
    assert f"context dead letter {letter['messageId']} of task {queued['id']} (queued turn) -> ContextQueue" in out
    done = poll(lambda: state_of(waits, queued["id"]), lambda s: s == "TASK_STATE_COMPLETED", timeout=30)
    assert done == "TASK_STATE_COMPLETED"
    # And the dead letter is gone, a second redrive finds nothing to move
    assert dead_letters(local_runtime, capsys, "context", queued["id"]) == []
    assert admin(local_runtime, capsys, "redrive", "--task", queued["id"])[1].strip() == "0 dead letters redriven"
    # And the task's record says who redrove what
    (action,) = store.operator_actions(queued["id"])
    assert action.action == "redrive" and action.operator.startswith("local:")
    assert action.detail == {"queue": "context", "messageId": letter["messageId"], "reason": letter["reason"]}


def test_a_dead_lettered_push_delivery_is_listed_with_its_config_and_delivered_once_redriven(
    local_runtime: LocalRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    assert local_runtime.runtime is not None
    # Given a push config for a port where nothing listens, on a task that completes at once
    port = free_port()
    url = local_runtime.agent_url("echo")
    config = {"id": "cfg-dlq", "url": f"http://127.0.0.1:{port}/hook", "token": "tok-dlq"}
    params = {"message": user_message("push me"), "configuration": {"taskPushNotificationConfig": config}}
    task = rpc(url, "SendMessage", params)["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    # When both deliveries (WORKING, COMPLETED) fail past the retry window (shrunk to 6 s)
    letters = poll(lambda: dead_letters(local_runtime, capsys, "push", task["id"]), lambda found: len(found) == 2, timeout=60)
    # Then `admin dlq` lists them with their task, config, event, webhook-id and reason
    assert [d["event"] for d in letters] == ["statusUpdate TASK_STATE_WORKING", "statusUpdate TASK_STATE_COMPLETED"]
    assert {d["configId"] for d in letters} == {"cfg-dlq"}
    assert all("retry window" in d["reason"] for d in letters)
    assert {d["task"]["state"] for d in letters} == {"TASK_STATE_COMPLETED"}
    webhook_ids = [d["webhookId"] for d in letters]

    # When the operator redrives them while the receiver is still down
    code, out = admin(local_runtime, capsys, "redrive", "--queue", "push", "--task", task["id"])
    assert code == 0 and out.splitlines()[-1] == "2 dead letters redriven", out
    # Then they are retried and dead-lettered again, listed again (new messages, the same deliveries): not lost
    again = poll(
        lambda: dead_letters(local_runtime, capsys, "push", task["id"]),
        lambda found: len(found) == 2 and not {d["messageId"] for d in found} & {d["messageId"] for d in letters},
        timeout=60,
    )
    assert [d["webhookId"] for d in again] == webhook_ids

    # When the receiver comes up (refusing its first request with a 503) and the operator redrives them
    receiver = Receiver(own_secrets(local_runtime.base_url, ALICE), lambda n: (503, {}) if n == 1 else (200, {}), port=port)
    try:
        code, out = admin(local_runtime, capsys, "redrive", "--task", task["id"])
        assert code == 0, out
        requests = receiver.wait(3, timeout=30)
        # Then each is delivered, signed (standardwebhooks verifies it), with the webhook-id its dead letter had; the
        # 503 is retried within a new retry window rather than dead-lettered at once
        assert [r["body"]["statusUpdate"]["status"]["state"] for r in requests] == [
            "TASK_STATE_WORKING", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"
        ]
        assert all(r["verified"] for r in requests)
        assert [r["headers"]["webhook-id"] for r in requests] == [webhook_ids[0], *webhook_ids]
        assert {r["headers"]["X-A2A-Notification-Token"] for r in requests} == {"tok-dlq"}
        assert dead_letters(local_runtime, capsys, "push", task["id"]) == []
    finally:
        receiver.close()
    # And each redrive is on the task's record, with the config and webhook-id it moved
    actions = local_runtime.runtime.store.operator_actions(task["id"])
    assert [a.action for a in actions] == ["redrive"] * 4
    assert [a.detail["webhookId"] for a in actions] == webhook_ids * 2
    assert {a.detail["configId"] for a in actions} == {"cfg-dlq"}


def test_the_publish_dead_letters_are_listed_and_not_redriven(
    local_runtime: LocalRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    assert local_runtime.stack is not None
    sqs, stack = local_runtime.aws.client("sqs"), local_runtime.stack
    task = rpc(local_runtime.agent_url("echo"), "SendMessage", {"message": user_message("hi")})["result"]["task"]
    # Given a table-change batch Lambda gave up on, as AWS writes it to PublishDLQ (locally nothing does: the local
    # stream poller never gives up)
    batch = {"requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": 101},
             "DDBStreamBatchInfo": {"shardId": "shardId-0001", "startSequenceNumber": "100", "endSequenceNumber": "142",
                                    "batchSize": 3, "streamArn": stack.table_stream_arn}}  # fmt: skip
    sqs.send_message(QueueUrl=stack.publish_dlq_url, MessageBody=json.dumps(batch))
    onward_url = sqs.create_queue(QueueName=f"{stack.prefix}-onward")["QueueUrl"]
    try:
        # When the operator lists them
        code, out = admin(local_runtime, capsys, "--json", "dlq", "--queue", "publish")
        assert code == 0
        (publish,) = json.loads(out)["queues"]
        # Then the batch says where it was, and names no task
        (changes,) = publish["letters"]
        assert changes["event"] == "3 table changes, shard shardId-0001 sequence numbers 100..142"
        assert changes["reason"] == "RetryAttemptsExhausted after 101 invocations" and changes["task"] is None
        # And the text output says what to do instead of a redrive
        text = admin(local_runtime, capsys, "dlq", "--queue", "publish")[1]
        assert "not redriven by `nylorun admin redrive`: the stream keeps changes 24 hours" in text
        # When the operator asks to redrive them, Then the command refuses, and they stay
        assert admin(local_runtime, capsys, "redrive", "--queue", "publish", "--all")[0] == 1
        assert admin(local_runtime, capsys, "redrive", "--task", task["id"])[1].strip() == "0 dead letters redriven"
        again = json.loads(admin(local_runtime, capsys, "--json", "dlq", "--queue", "publish")[1])
        assert [len(q["letters"]) for q in again["queues"]] == [1]
        # When a dead-letter queue has a redrive policy of its own (each look would count towards moving it on)
        target = sqs.get_queue_attributes(QueueUrl=onward_url, AttributeNames=["QueueArn"])["Attributes"]
        onward = json.dumps({"deadLetterTargetArn": target["QueueArn"], "maxReceiveCount": 1})
        sqs.set_queue_attributes(QueueUrl=stack.publish_dlq_url, Attributes={"RedrivePolicy": onward})
        # Then the command refuses to look at it, and its message stays where it was
        assert admin(local_runtime, capsys, "dlq", "--queue", "publish")[0] == 1
        sqs.set_queue_attributes(QueueUrl=stack.publish_dlq_url, Attributes={"RedrivePolicy": ""})
        assert len(json.loads(admin(local_runtime, capsys, "--json", "dlq", "--queue", "publish")[1])["queues"][0]["letters"]) == 1
    finally:
        sqs.purge_queue(QueueUrl=stack.publish_dlq_url)
        sqs.delete_queue(QueueUrl=onward_url)
