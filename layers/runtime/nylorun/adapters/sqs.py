"""The context queue on SQS FIFO: one message group per context, so turns of one context keep their order
and never hold up another context's."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from nylorun.ports import Delivery


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
            MessageDeduplicationId=delivery.webhook_id,
        )

    def retry_later(self, receipt_handle: str, seconds: int) -> None:
        self._sqs.change_message_visibility(
            QueueUrl=self._url, ReceiptHandle=receipt_handle, VisibilityTimeout=max(0, min(seconds, 43_200))
        )
