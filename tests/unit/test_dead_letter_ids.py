"""The deduplication ids of dead letters and of their redrives (docs/operate.md). SQS FIFO drops a message whose
deduplication id it saw in the last 5 minutes, even one since deleted; moto only compares with messages still on
the queue, so these ids are checked here, on a recording SQS client, rather than end to end."""

from __future__ import annotations

import json
import uuid
from typing import Any

from nylorun.adapters.sqs import SqsDeadLetters, SqsPushQueue
from nylorun.ports import Delivery

DLQ, SOURCE = "https://sqs/PushDLQ.fifo", "https://sqs/PushQueue.fifo"


class RecordingSqs:
    """The SQS calls the adapters make, on two FIFO queues held as lists; sends are recorded, never deduplicated."""

    def __init__(self) -> None:
        self.queues: dict[str, list[dict[str, Any]]] = {DLQ: [], SOURCE: []}
        self.sent: list[dict[str, Any]] = []
        self.on_send: Any = None  # called after each send to the source queue (a consumer giving up at once)

    def send_message(self, QueueUrl: str, MessageBody: str, MessageGroupId: str, MessageDeduplicationId: str) -> None:
        self.sent.append({"queue": QueueUrl, "body": json.loads(MessageBody), "dedup": MessageDeduplicationId})
        message = {"MessageId": str(uuid.uuid4()), "ReceiptHandle": str(uuid.uuid4()), "Body": MessageBody,
                   "Attributes": {"SentTimestamp": "0", "MessageGroupId": MessageGroupId}, "in_flight": False}  # fmt: skip
        self.queues[QueueUrl].append(message)
        if QueueUrl == SOURCE and self.on_send:
            self.on_send(json.loads(MessageBody))

    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> dict[str, Any]:
        return {"Attributes": {"ApproximateNumberOfMessages": str(len(self.queues[QueueUrl]))}}

    def receive_message(self, QueueUrl: str, MaxNumberOfMessages: int, **_: Any) -> dict[str, Any]:
        ready = [m for m in self.queues[QueueUrl] if not m["in_flight"]][:MaxNumberOfMessages]
        for message in ready:
            message["in_flight"] = True
        return {"Messages": ready}

    def delete_message(self, QueueUrl: str, ReceiptHandle: str) -> None:
        self.queues[QueueUrl] = [m for m in self.queues[QueueUrl] if m["ReceiptHandle"] != ReceiptHandle]

    def change_message_visibility_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> None:
        handles = {e["ReceiptHandle"] for e in Entries}
        for message in self.queues[QueueUrl]:
            message["in_flight"] = message["in_flight"] and message["ReceiptHandle"] not in handles


def delivery(first_attempt_at: float = 1_000.0) -> Delivery:
    return Delivery(event_id="evt-1", task_id="task-1", config_id="c1", kind="statusUpdate",
                    payload={"status": {"state": "TASK_STATE_WORKING"}}, first_attempt_at=first_attempt_at)  # fmt: skip


def test_a_redriven_delivery_that_gives_up_again_is_a_new_dead_letter_with_the_same_webhook_id() -> None:
    sqs = RecordingSqs()
    push = SqsPushQueue(sqs, SOURCE, DLQ)
    dead_letters = SqsDeadLetters(sqs, {"push": DLQ}, {"push": SOURCE}, clock=lambda: 90_000.0)
    # Given a delivery the push function gave up on, twice for one message (a retried invocation)
    push.dead_letter(delivery(), "HTTP 400")
    push.dead_letter(delivery(), "HTTP 400")
    first, repeat = sqs.sent
    # Then both carry one deduplication id: SQS keeps one dead letter
    assert first["dedup"] == repeat["dedup"]
    sqs.queues[DLQ] = sqs.queues[DLQ][:1]  # as SQS keeps it (this client deduplicates nothing)
    # When the operator redrives it and the push function gives up on it again at once
    sqs.on_send = lambda body: push.dead_letter(Delivery(**body["delivery"]), "HTTP 400")
    moved = dead_letters.redrive("push", lambda letter: True, before=lambda letter: None)
    # Then it went back with a new retry window, under a deduplication id of its own (not the webhook-id the push
    # queue saw when it was first queued)
    redriven, again = sqs.sent[2:]
    assert redriven["queue"] == SOURCE and redriven["body"]["delivery"]["first_attempt_at"] == 90_000.0
    assert redriven["dedup"] == f"redrive-{moved[0].message_id}" != delivery().webhook_id
    # And the new dead letter has a deduplication id of its own (with the first one's, SQS would drop it for 5
    # minutes: lost), and the same webhook-id
    assert again["queue"] == DLQ and again["dedup"] != first["dedup"]
    assert Delivery(**again["body"]["delivery"]).webhook_id == delivery().webhook_id
    # And one run moved it once: the new dead letter waits for the next redrive instead of going round
    assert len(moved) == 1 and len(sqs.queues[DLQ]) == 1


def test_a_dead_letter_redriven_twice_is_sent_with_the_same_deduplication_id() -> None:
    sqs = RecordingSqs()
    dead_letters = SqsDeadLetters(sqs, {"push": DLQ}, {"push": SOURCE}, clock=lambda: 90_000.0)
    SqsPushQueue(sqs, SOURCE, DLQ).dead_letter(delivery(), "HTTP 500")
    # Given a redrive interrupted after its send, before its delete (the dead letter is still there)
    kept = dict(sqs.queues[DLQ][0])
    dead_letters.redrive("push", lambda letter: True, before=lambda letter: None)
    sqs.queues[DLQ].append({**kept, "in_flight": False})
    # When it is run again
    dead_letters.redrive("push", lambda letter: True, before=lambda letter: None)
    # Then the second send has the first one's deduplication id: SQS drops it within 5 minutes
    first, second = (s for s in sqs.sent if s["queue"] == SOURCE)
    assert first["dedup"] == second["dedup"] == f"redrive-{kept['MessageId']}"
