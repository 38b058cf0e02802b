"""Event source mappings on one machine: what Lambda does between a stream (or queue) and a function.

moto's own mappings run inline and ignore partial batch failures, so the
local Runtime polls instead, with Lambda's semantics: batches, `batchItemFailures` retried from the first
failed record on, a failed invocation retried with backoff, order kept per shard.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

from nylorun.observability import logger

from nylorun_local.activity import ACTIVITY, IDLE_MAX_SECONDS, Backoff, watch_boto3_writes
from nylorun_local.aws import LocalAws, invoke_registered

# Stream records only follow table writes, and every table write wakes the poller: it can sleep long.
STREAM_IDLE_MAX_SECONDS = 5.0


class _Poller(ABC):
    """A thread that calls `_poll_once` until stopped, sleeping (until a write wakes it) when it finds nothing."""

    def __init__(self, function_name: str, idle_max: float = IDLE_MAX_SECONDS) -> None:
        self._function = function_name
        self._idle_max = idle_max
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"poll-{function_name}", daemon=True)
        self.idle = threading.Event()
        # Held for each poll: whoever holds it keeps the function from being invoked by this poller meanwhile.
        self._polling = threading.Lock()

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        ACTIVITY.bump()
        self._thread.join(timeout=5)

    @property
    def function_name(self) -> str:
        return self._function

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No invocation from this poller until the block ends (the current one, if any, finishes first). Lambda
        runs one invocation at a time per execution environment; a caller that invokes the handler module itself
        pauses the poller to keep to that (the handler modules keep per-invocation state)."""
        with self._polling:
            yield

    @abstractmethod
    def _poll_once(self) -> bool:
        """One look for work: True when it found (and handed on) some."""

    def _run(self) -> None:
        watch_boto3_writes()
        backoff = Backoff(most=self._idle_max)
        while not self._stop.is_set():
            try:
                with self._polling:
                    worked = self._poll_once()
            except Exception:  # noqa: BLE001 - keep polling: a failure here must not silently stop delivery
                logger.exception("poller for %s failed; retrying", self._function)
                worked = False
            if worked:
                self.idle.clear()
                backoff.worked()
            else:
                self.idle.set()
                backoff.idle(self._stop)


class StreamPoller(_Poller):
    """DynamoDB stream → function, like Lambda's DynamoDB event source mapping."""

    def __init__(self, aws: LocalAws, stream_arn: str, function_name: str, batch_size: int = 100) -> None:
        self._streams = aws.client("dynamodbstreams")
        self._arn = stream_arn
        self._batch = batch_size
        self._next: dict[str, int] = {}
        self._pending: dict[str, list[dict[str, Any]]] = {}
        super().__init__(function_name, idle_max=STREAM_IDLE_MAX_SECONDS)

    def _poll_once(self) -> bool:
        shards = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"]["Shards"]
        worked = False
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._next:
                self._next[shard_id] = int(shard["SequenceNumberRange"]["StartingSequenceNumber"])
                self._pending[shard_id] = []
            pending = self._pending[shard_id]
            if len(pending) < self._batch:
                # Read by position, not by moto's NextShardIterator: moto numbers records racily under
                # concurrent writes, and its "after the highest number" iterator can then re-read records.
                iterator = self._streams.get_shard_iterator(
                    StreamArn=self._arn,
                    ShardId=shard_id,
                    ShardIteratorType="AT_SEQUENCE_NUMBER",
                    SequenceNumber=str(self._next[shard_id]),
                )["ShardIterator"]
                records = self._streams.get_records(ShardIterator=iterator, Limit=self._batch - len(pending))
                fresh = records.get("Records", [])
                self._next[shard_id] += len(fresh)
                pending.extend({**r, "eventSourceARN": self._arn} for r in fresh)
            if not pending:
                continue
            worked = True
            batch = pending[: self._batch]
            result, error = invoke_registered(self._function, {"Records": batch})
            if error:
                time.sleep(0.2)  # the whole batch is retried, in order
                continue
            failures = (result or {}).get("batchItemFailures") or []
            if failures:
                # Lambda retries from the first failed record on (sequence numbers order the shard).
                first = min(f["itemIdentifier"] for f in failures)
                keep = [r for r in batch if r["dynamodb"]["SequenceNumber"] >= first]
                self._pending[shard_id] = keep + pending[len(batch) :]
                time.sleep(0.2)
            else:
                self._pending[shard_id] = pending[len(batch) :]
        return worked


class QueuePoller(_Poller):
    """SQS queue → function, like Lambda's SQS event source mapping: batches of up to `batch_size`, the
    messages named in `batchItemFailures` (or the whole batch, if the function fails) stay on the queue
    and come back after their visibility timeout; the rest are deleted."""

    def __init__(self, aws: LocalAws, queue_url: str, function_name: str, batch_size: int = 10) -> None:
        self._sqs = aws.client("sqs")
        self._url = queue_url
        self._arn = self._sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self._batch = batch_size
        super().__init__(function_name)

    def _poll_once(self) -> bool:
        out = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=self._batch,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = out.get("Messages", [])
        if not messages:
            return False
        records = [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": m.get("MessageAttributes", {}),
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": self._arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
        result, error = invoke_registered(self._function, {"Records": records})
        if error:
            return True  # nothing deleted: the whole batch comes back after its visibility timeout
        failed = {f["itemIdentifier"] for f in (result or {}).get("batchItemFailures") or []}
        done = [r for r in records if r["messageId"] not in failed]
        for start in range(0, len(done), 10):
            self._sqs.delete_message_batch(
                QueueUrl=self._url,
                Entries=[{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done[start : start + 10])],
            )
        return True
