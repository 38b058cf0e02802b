"""Event source mappings on one machine: what Lambda does between a stream (or queue) and a function.

moto's own mappings run inline and ignore partial batch failures, so the
local Runtime polls instead, with Lambda's semantics: batches, `batchItemFailures` retried from the first
failed record on, a failed invocation retried with backoff, order kept per shard.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, Self

from nylorun.observability import logger

from nylorun_local.activity import (
    IDLE_MAX_SECONDS,
    QUEUE_WRITES,
    TABLE_WRITES,
    Activity,
    Backoff,
    watch_boto3_writes,
)
from nylorun_local.aws import LocalAws
from nylorun_local.lambda_shim import invoke_registered
from nylorun_local.ttl import TTL_IDENTITY, TTL_REMOVED

# Stream records only follow table writes, and every table write wakes the poller: it can sleep long.
STREAM_IDLE_MAX_SECONDS = 5.0
# DynamoDB Streams GetRecords: at most 1,000 records a call
# (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_GetRecords.html).
GET_RECORDS_MAX = 1000


class _Poller(ABC):
    """Threads that call `_poll_once` until stopped, each sleeping (until a write wakes it) when it finds nothing.

    One thread per execution environment: Lambda runs an event source's batches in as many environments at once
    as the source allows (a FIFO queue: one per message group in flight, up to MaximumConcurrency), each running
    one batch at a time."""

    def __init__(
        self, function_name: str, activity: Activity, idle_max: float = IDLE_MAX_SECONDS, environments: int = 1
    ) -> None:
        self._function = function_name
        self._idle_max = idle_max
        self._activity = activity  # what wakes it: the writes that can give it work
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(n,), name=f"poll-{function_name}-{n}", daemon=True)
            for n in range(environments)
        ]
        # Held for each poll: whoever holds them all keeps the function from being invoked by this poller meanwhile.
        self._polling = [threading.Lock() for _ in range(environments)]
        # Set while the first environment finds work. The others poll only then (Lambda too scales out only with a
        # backlog): woken by every write, idle extra environments would triple the local stack's polling.
        self._busy = threading.Event()

    def start(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._busy.set()  # the extra environments wake, see the stop, and end
        self._activity.bump()
        for thread in self._threads:
            thread.join(timeout=5)

    @property
    def function_name(self) -> str:
        return self._function

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No invocation from this poller until the block ends (the current ones, if any, finish first). Lambda
        runs one invocation at a time per execution environment; a caller that invokes the handler module itself
        pauses the poller to keep to that (the handler modules keep per-invocation state)."""
        with ExitStack() as held:
            for lock in self._polling:  # always in the same order: two pausers cannot deadlock
                held.enter_context(lock)
            yield

    @abstractmethod
    def _poll_once(self, environment: int) -> bool:
        """One look for work, invoking the function in that environment: True when it found (and handed on) some."""

    def _run(self, environment: int) -> None:
        watch_boto3_writes()
        backoff = Backoff(self._activity, most=self._idle_max)
        while not self._stop.is_set():
            if environment > 0 and not self._busy.wait(timeout=self._idle_max):
                continue
            try:
                with self._polling[environment]:
                    worked = self._poll_once(environment)
            except Exception:  # noqa: BLE001 - keep polling: a failure here must not silently stop delivery
                logger.exception("poller for %s failed; retrying", self._function)
                worked = False
            if environment == 0:
                (self._busy.set if worked else self._busy.clear)()
            if worked:
                backoff.worked()
            else:
                backoff.idle(self._stop)


class StreamPoller(_Poller):
    """DynamoDB stream → function, like Lambda's DynamoDB event source mapping: only the records its filter
    patterns match (the template's FilterCriteria; Lambda drops the others uninvoked). A REMOVE of an item the local
    TTL took (nylorun_local.ttl) carries the userIdentity DynamoDB's TTL gives its deletions. Reads moto's one shard
    by position (LocalAws.stream_records), in order."""

    def __init__(
        self,
        aws: LocalAws,
        stream_arn: str,
        function_name: str,
        batch_size: int = 100,
        filters: Sequence[str] = (),
        idle_max: float = STREAM_IDLE_MAX_SECONDS,
        activity: Activity = TABLE_WRITES,
    ) -> None:
        from moto.events.models import EventPattern  # Lambda's filter rules are EventBridge's event patterns

        self._aws = aws
        self._arn = stream_arn
        self._batch = batch_size
        self._patterns = [EventPattern.load(p) for p in filters]
        self._next = 0  # the position of the next record to read
        self._pending: list[dict[str, Any]] = []
        super().__init__(function_name, activity, idle_max=idle_max)

    def _wanted(self, record: dict[str, Any]) -> bool:
        keys = record.get("dynamodb", {}).get("Keys", {})
        if record.get("eventName") == "REMOVE" and TTL_REMOVED.took(keys):
            record["userIdentity"] = TTL_IDENTITY
        return not self._patterns or any(p.matches_event(record) for p in self._patterns)  # type: ignore[arg-type]

    def _poll_once(self, environment: int) -> bool:
        worked = False
        if len(self._pending) < self._batch:
            # Lambda's batch size counts the records its filter keeps: read up to GetRecords' most (1,000), so a
            # mapping whose filter keeps few keeps up with the stream.
            limit = self._batch - len(self._pending) if not self._patterns else GET_RECORDS_MAX
            fresh = self._aws.stream_records(self._arn, self._next, limit)
            self._next += len(fresh)
            worked = bool(fresh)  # read past: look again at once, there may be more
            self._pending.extend({**r, "eventSourceARN": self._arn} for r in fresh if self._wanted(r))
        if not self._pending:
            return worked
        batch = self._pending[: self._batch]
        result, error = invoke_registered(self._function, {"Records": batch})
        if error:
            time.sleep(0.2)  # the whole batch is retried, in order
            return True
        failures = (result or {}).get("batchItemFailures") or []
        if failures:
            # Lambda retries from the first failed record on (sequence numbers order the shard).
            first = min(int(f["itemIdentifier"]) for f in failures)
            keep = [r for r in batch if int(r["dynamodb"]["SequenceNumber"]) >= first]
            self._pending = keep + self._pending[len(batch) :]
            time.sleep(0.2)
        else:
            self._pending = self._pending[len(batch) :]
        return True


def sqs_records(messages: list[dict[str, Any]], queue_arn: str) -> list[dict[str, Any]]:
    """ReceiveMessage's messages as Lambda's SQS event gives them."""
    return [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "messageAttributes": m.get("MessageAttributes", {}),
            "md5OfBody": m.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": queue_arn,
            "awsRegion": queue_arn.split(":")[3],
        }
        for m in messages
    ]


class QueuePoller(_Poller):
    """SQS queue → function, like Lambda's SQS event source mapping: batches of up to `batch_size`, the
    messages named in `batchItemFailures` (or the whole batch, if the function fails) stay on the queue
    and come back after their visibility timeout; the rest are deleted. With several environments, each receives
    its own batches (a FIFO queue hands out no group that is in flight elsewhere, so each group keeps its order)."""

    def __init__(
        self, aws: LocalAws, queue_url: str, function_name: str, batch_size: int = 10, environments: int = 1
    ) -> None:
        self._sqs = aws.client("sqs")
        self._url = queue_url
        self._arn = self._sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self._batch = batch_size
        super().__init__(function_name, QUEUE_WRITES, environments=environments)

    def _poll_once(self, environment: int) -> bool:
        if not LocalAws.receivable(self._url):
            return False  # nothing to hand out: no ReceiveMessage (see LocalAws.receivable)
        out = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=self._batch,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = out.get("Messages", [])
        if not messages:
            return False
        records = sqs_records(messages, self._arn)
        result, error = invoke_registered(self._function, {"Records": records}, environment)
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
