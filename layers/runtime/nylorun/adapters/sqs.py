"""The context queue on SQS FIFO: one message group per context, so turns of one context keep their order
and never hold up another context's."""

from __future__ import annotations

import json
from typing import Any


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
