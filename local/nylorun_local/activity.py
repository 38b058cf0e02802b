"""Wake-ups for the local pollers, so an idle `nylorun serve` sleeps instead of polling moto.

Every write a function or the api makes through boto3 bumps a counter: a table write the stream pollers'
(TABLE_WRITES), a queue message or an event (which the bus puts on a queue) the queue pollers' (QUEUE_WRITES).
A poller that found nothing sleeps with a growing timeout (up to `IDLE_MAX_SECONDS`) or until its counter moves:
a table write does not wake the queue pollers, nor a queue message the stream pollers, for nothing. What no
write announces (an SQS message whose delay or visibility timeout runs out) is found
by the timeout, so it arrives at most `IDLE_MAX_SECONDS` late. A stream record always follows a table
write, so the stream poller may sleep longer.
"""

from __future__ import annotations

import threading
from typing import Any

import boto3

IDLE_MAX_SECONDS = 1.0


class Activity:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._generation = 0

    def bump(self, **_: Any) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    @property
    def generation(self) -> int:
        return self._generation

    def wait(self, seen: int, timeout: float) -> int:
        """Until the generation differs from `seen`, or `timeout` seconds; returns the generation now."""
        with self._changed:
            self._changed.wait_for(lambda: self._generation != seen, timeout=timeout)
            return self._generation


TABLE_WRITES = Activity()
QUEUE_WRITES = Activity()
# The calls that can give a poller work (reads never do, and the pollers' own reads must not wake them).
WRITES = {
    "dynamodb": (TABLE_WRITES, ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")),
    "sqs": (QUEUE_WRITES, ("SendMessage", "SendMessageBatch")),
    "events": (QUEUE_WRITES, ("PutEvents",)),
}
_watching = threading.Lock()
_watched: set[int] = set()


def watch_boto3_writes() -> None:
    """Bump TABLE_WRITES or QUEUE_WRITES after every write made through boto3's default session (what
    `boto3.client` uses)."""
    session = boto3._get_default_session()  # the session every boto3.client() call shares
    with _watching:
        if id(session) in _watched:
            return
        _watched.add(id(session))
        for service, (activity, operations) in WRITES.items():
            for operation in operations:
                session.events.register(f"after-call.{service}.{operation}", activity.bump)


class Backoff:
    """A poller's sleep: none while it finds work, then growing up to IDLE_MAX_SECONDS, cut short by writes."""

    def __init__(self, activity: Activity, first: float = 0.02, most: float = IDLE_MAX_SECONDS) -> None:
        self._first = first
        self._most = most
        self._next = first
        self._activity = activity
        self._seen = activity.generation

    def worked(self) -> None:
        self._next = self._first

    def idle(self, stop: threading.Event) -> None:
        if stop.is_set():
            return
        seen = self._seen
        self._seen = self._activity.wait(seen, self._next)
        self._next = self._first if self._seen != seen else min(self._next * 2, self._most)
