"""The context queue on SQS FIFO: one message group per context, so turns of one context keep their order
and never hold up another context's."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nylorun.ports import (
    REDRIVEN_QUEUES,
    DeadLetter,
    DeadLetterLook,
    DeadLetterQueue,
    DeadLetterQueueRefused,
    Delivery,
)


def process_groups_at_once(
    event: dict[str, Any], process_group: Callable[[dict[str, Any]], dict[str, Any]], most: int
) -> dict[str, Any]:
    """A FIFO batch's message groups side by side, up to `most` at a time; each group's records in order, by
    `process_group` (Powertools' FIFO processor on that group's records alone: a failed record fails the rest of its
    group). Lambda hands one invocation up to ten groups; run one after another, the last group waited for every
    other group's deliveries (one task's fan-out ahead of another subject's only event), and a slow
    receiver for all of them. The answer: every group's `batchItemFailures`."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in event.get("Records", []):
        groups.setdefault(record.get("attributes", {}).get("MessageGroupId", ""), []).append(record)
    if len(groups) <= 1:
        return process_group(event)
    with ThreadPoolExecutor(max_workers=min(most, len(groups))) as pool:
        # Each group in a copy of the invocation's context, made here: its log lines keep the invocation's keys
        # (nylorun.observability).
        runs = [(contextvars.copy_context(), {"Records": records}) for records in groups.values()]
        answers = list(pool.map(lambda run: run[0].run(process_group, run[1]), runs))
    return {"batchItemFailures": [failure for answer in answers for failure in answer.get("batchItemFailures", [])]}


def hold_failed_groups(
    event: dict[str, Any], response: dict[str, Any], delays: dict[str, int], retry_later: Callable[[str, int], None]
) -> None:
    """After a FIFO batch: every failed message of a group that asked to wait waits as long.

    Powertools' FIFO processor fails the rest of a group once one message fails (order), but those messages
    would otherwise stay out of sight for the queue's whole visibility timeout and block the group longer
    than its head asked for.
    """
    failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
    for record in event.get("Records", []):
        group = record.get("attributes", {}).get("MessageGroupId", "")
        if record["messageId"] in failed and group in delays:
            retry_later(record["receiptHandle"], delays[group])


class SqsContextQueue:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._sqs = client
        self._url = queue_url

    def enqueue(self, task_id: str, group: str) -> None:
        self._sqs.send_message(
            QueueUrl=self._url,
            MessageBody=json.dumps({"taskId": task_id}),
            MessageGroupId=group,
            MessageDeduplicationId=task_id,  # a retried enqueue of the same turn is dropped by SQS
        )

    def retry_later(self, receipt_handle: str, seconds: int) -> None:
        """Keep a message whose context is still busy out of sight for a while (the group waits with it)."""
        self._sqs.change_message_visibility(
            QueueUrl=self._url, ReceiptHandle=receipt_handle, VisibilityTimeout=max(0, min(seconds, 43_200))
        )


class SqsPushQueue:
    """Push deliveries on SQS FIFO (one group per task + config) and their dead-letter queue."""

    def __init__(self, client: Any, queue_url: str, dlq_url: str) -> None:
        self._sqs = client
        self._url = queue_url
        self._dlq = dlq_url

    def send_deliveries(self, deliveries: Sequence[Delivery]) -> None:
        # SendMessageBatch takes at most 10 messages per call
        # (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html).
        for start in range(0, len(deliveries), 10):
            chunk = deliveries[start : start + 10]
            answer = self._sqs.send_message_batch(
                QueueUrl=self._url,
                Entries=[
                    {
                        "Id": str(i),
                        "MessageBody": json.dumps({"delivery": json.loads(d.to_json())}),
                        "MessageGroupId": d.group,
                        "MessageDeduplicationId": d.webhook_id,
                    }
                    for i, d in enumerate(chunk)
                ],
            )
            if answer.get("Failed"):
                # A partial failure: the whole fan-out is retried; the deliveries already queued are dropped
                # by SQS as duplicates (same deduplication id within 5 minutes).
                raise RuntimeError(f"SendMessageBatch refused {len(answer['Failed'])} deliveries: {answer['Failed'][0]}")

    def send_fan_out(self, task_id: str, event_id: str, event: dict[str, Any]) -> None:
        self._sqs.send_message(
            QueueUrl=self._url,
            MessageBody=json.dumps({"fanOut": event}),
            MessageGroupId="fanout-" + hashlib.sha256(task_id.encode()).hexdigest(),
            MessageDeduplicationId=f"fanout-{event_id}",
        )

    def dead_letter(self, delivery: Any, reason: str) -> None:
        # The delivery names its config; the config's credentials never travel in a message.
        self._sqs.send_message(
            QueueUrl=self._dlq,
            MessageBody=json.dumps({"delivery": json.loads(delivery.to_json()), "reason": reason}),
            MessageGroupId=delivery.group,
            # One dead letter per delivery message (a retried invocation that gives up twice sends one), but a
            # redriven delivery (`nylorun admin redrive`: a new retry window) that gives up again is a new one: with
            # the webhook-id alone SQS would drop it as a duplicate for 5 minutes, and it would be lost
            # (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/using-messagededuplicationid-property.html).
            MessageDeduplicationId=f"{delivery.webhook_id}-{int(delivery.first_attempt_at * 1000)}",
        )

    def retry_later(self, receipt_handle: str, seconds: int) -> None:
        self._sqs.change_message_visibility(
            QueueUrl=self._url, ReceiptHandle=receipt_handle, VisibilityTimeout=max(0, min(seconds, 43_200))
        )

    def done(self, receipt_handle: str) -> None:
        """Delete a message handled before its batch ends, so its message group moves on now. If SQS does not take
        it, the event source mapping deletes it with the batch anyway (and deleting a message twice succeeds,
        https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_DeleteMessage.html)."""
        with contextlib.suppress(BotoCoreError, ClientError):
            self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=receipt_handle)


# ---------------------------------------------------------------------------------------------- dead letters
# ReceiveMessage takes at most 10 messages a call, and ChangeMessageVisibilityBatch at most 10
# entries (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ReceiveMessage.html).
_BATCH = 10
# A long poll of 1 s asks every SQS server; a short poll (0 s) samples a subset and may answer "empty" while messages
# are there, which would end a look or a redrive early
# (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-short-and-long-polling.html).
_WAIT_SECONDS = 1
# How long a message a look or a redrive received stays hidden if the command dies before it made the message
# visible again (or deleted it): short, so an interrupted command leaves the queue as it was within a minute.
LOOK_HOLD_SECONDS = 30
REDRIVE_HOLD_SECONDS = 60


@dataclass(frozen=True)
class _Received:
    letter: DeadLetter
    receipt: str
    group: str
    body: dict[str, Any]


class SqsDeadLetters:
    """The Runtime's dead-letter queues. The context and push queues' (FIFO) are looked at without consuming and
    redriven one message at a time (receive → send to the source queue, same message group → delete); the push
    rule's and the publish function's (standard queues, EventBridge's and Lambda's formats) are looked at only.

    SQS's own StartMessageMoveTask redrives FIFO dead-letter queues too, but moves a whole queue to the queues its
    messages were moved from by a redrive policy (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/
    APIReference/API_StartMessageMoveTask.html): a push delivery the push function dead-lettered itself has no such
    source, it cannot be limited to one task, cannot restart a delivery's retry window, and moto does not implement
    it. So the Runtime moves its own messages, in the formats it wrote them (SqsContextQueue, SqsPushQueue)."""

    def __init__(
        self,
        client: Any,
        dlqs: dict[DeadLetterQueue, str],
        sources: dict[DeadLetterQueue, str],
        clock: Callable[[], float],
    ) -> None:
        self._sqs = client
        self._dlqs = {queue: url for queue, url in dlqs.items() if url}
        self._sources = {queue: url for queue, url in sources.items() if url and queue in REDRIVEN_QUEUES}
        self._now = clock

    def queues(self) -> list[DeadLetterQueue]:
        """The dead-letter queues this Runtime has (a queue whose URL is not set is left out)."""
        return list(self._dlqs)

    def look(self, queue: DeadLetterQueue) -> DeadLetterLook:
        url = self._dlqs[queue]
        self._refuse_onward_redrive(url)
        total = int(
            self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
                "Attributes"
            ]["ApproximateNumberOfMessages"]
        )
        received: list[_Received] = []
        try:
            # Every message stays in flight until the look ends: a queue then hands out others (a FIFO queue the
            # next groups'), never the same one twice.
            while batch := self._receive(queue, url, LOOK_HOLD_SECONDS):
                received.extend(batch)
        finally:
            self._release(url, [r.receipt for r in received])
        # A look longer than its hold sees the first messages again: each is shown once.
        letters = {r.letter.message_id: r.letter for r in received}
        return DeadLetterLook(queue, list(letters.values()), total)

    def redrive(
        self, queue: DeadLetterQueue, wanted: Callable[[DeadLetter], bool], before: Callable[[DeadLetter], None]
    ) -> list[DeadLetter]:
        if queue not in self._sources:
            raise ValueError(f"{queue} dead letters are not redriven by the Runtime")
        url, source = self._dlqs[queue], self._sources[queue]
        self._refuse_onward_redrive(url)
        held: list[str] = []
        moved: list[DeadLetter] = []
        done: set[tuple[str, str, str, str]] = set()
        try:
            while batch := self._receive(queue, url, REDRIVE_HOLD_SECONDS):
                for message in batch:
                    letter = message.letter
                    # Once per turn or delivery in one run: a redriven delivery refused again at once is back here
                    # with a new message id, and would otherwise go round until the command is stopped.
                    if not letter.task_id or letter.key in done or not wanted(letter):
                        held.append(message.receipt)
                        continue
                    before(letter)
                    self._sqs.send_message(
                        QueueUrl=source,
                        MessageBody=json.dumps(self._redriven(queue, message.body)),
                        MessageGroupId=message.group,
                        # Fresh, and the same for the same dead letter: the source queue dropped the first id as a
                        # duplicate for 5 minutes, and a redrive interrupted between this send and the delete below,
                        # then run again, sends a copy SQS drops in those 5 minutes (after them the consumers are
                        # idempotent: dispatch starts a turn once, a delivery keeps its webhook-id)
                        # (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html).
                        MessageDeduplicationId=f"redrive-{letter.message_id}",
                    )
                    self._sqs.delete_message(QueueUrl=url, ReceiptHandle=message.receipt)
                    done.add(letter.key)
                    moved.append(letter)
        finally:
            self._release(url, held)
        return moved

    def _redriven(self, queue: DeadLetterQueue, body: dict[str, Any]) -> dict[str, Any]:
        if queue == "push":
            # Profile v2: "Retries last up to 24 hours", counted from the first attempt. A redriven delivery gets a
            # new window from now; with the old one it would be dead-lettered again at its first failure.
            return {"delivery": {**body["delivery"], "first_attempt_at": self._now()}}
        return body

    def _refuse_onward_redrive(self, dlq_url: str) -> None:
        """Receiving bumps a message's receive count; on a queue with a redrive policy of its own, a look could
        then move its messages on. The Runtime's dead-letter queues have none (template.yaml: the end of the line)."""
        attributes = self._sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["RedrivePolicy"])
        if attributes.get("Attributes", {}).get("RedrivePolicy"):
            raise DeadLetterQueueRefused(f"{dlq_url} has a redrive policy: looking at it could move its messages on")

    def _receive(self, queue: DeadLetterQueue, url: str, hold: int) -> list[_Received]:
        messages = self._sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=_BATCH,
            VisibilityTimeout=hold,
            WaitTimeSeconds=_WAIT_SECONDS,
            MessageSystemAttributeNames=["SentTimestamp", "MessageGroupId"],
            MessageAttributeNames=["All"],  # EventBridge says why in ERROR_CODE and ERROR_MESSAGE
        ).get("Messages", [])
        return [self._read(queue, m) for m in messages]

    def _release(self, url: str, receipts: list[str]) -> None:
        """Visible again at once (ChangeMessageVisibility 0): the message group is free for the next look."""
        for start in range(0, len(receipts), _BATCH):
            self._sqs.change_message_visibility_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": receipt, "VisibilityTimeout": 0}
                    for n, receipt in enumerate(receipts[start : start + _BATCH])
                ],
            )

    @staticmethod
    def _read(queue: DeadLetterQueue, message: dict[str, Any]) -> _Received:
        attributes = message.get("Attributes", {})
        sent = datetime.fromtimestamp(int(attributes.get("SentTimestamp", "0")) / 1000, tz=UTC)
        since = sent.isoformat(timespec="seconds").replace("+00:00", "Z")
        try:
            body = json.loads(message["Body"])
            fields = _READERS[queue](body, message.get("MessageAttributes", {}))
        except (ValueError, KeyError, TypeError, AttributeError):
            body, fields = {}, {"task_id": "", "reason": "unreadable body (not the format this queue gets)"}
        letter = DeadLetter(queue=queue, message_id=message["MessageId"], since=since, **fields)
        return _Received(letter, message["ReceiptHandle"], attributes.get("MessageGroupId", ""), body)


def _context_letter(body: dict[str, Any], _: dict[str, Any]) -> dict[str, str]:
    # Moved here by the context queue's redrive policy: every receive (a look while its context was busy, or a
    # failed start) counted, up to maxReceiveCount.
    return {"task_id": str(body["taskId"]), "reason": "not started within the context queue's receives"}


def _push_letter(body: dict[str, Any], _: dict[str, Any]) -> dict[str, str]:
    delivery = Delivery(**body["delivery"])  # as SqsPushQueue.dead_letter wrote it
    state = (delivery.payload.get("status") or {}).get("state", "") if delivery.kind == "statusUpdate" else ""
    return {"task_id": delivery.task_id, "reason": str(body.get("reason", "")), "config_id": delivery.config_id,
            "event_id": delivery.event_id, "event": f"{delivery.kind} {state}".strip(),
            "webhook_id": delivery.webhook_id}  # fmt: skip


def _publish_letter(body: dict[str, Any], _: dict[str, Any]) -> dict[str, str]:
    # Lambda's record of a stream batch it gave up on: the batch's place in the stream, not its changes
    # (https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html).
    batch = body["DDBStreamBatchInfo"]
    context = body.get("requestContext", {})
    return {"task_id": "", "reason": f"{context.get('condition', '')} after {context.get('approximateInvokeCount', '?')} invocations",
            "event": f"{batch['batchSize']} table changes, shard {batch['shardId']} sequence numbers "
                     f"{batch['startSequenceNumber']}..{batch['endSequenceNumber']}"}  # fmt: skip


_READERS: dict[DeadLetterQueue, Callable[[dict[str, Any], dict[str, Any]], dict[str, str]]] = {
    "context": _context_letter,
    "push": _push_letter,
    "publish": _publish_letter,
}
