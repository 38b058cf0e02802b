"""moto's SQS counts a queue's messages three times for every message a send takes (to read one queue attribute).

Written for moto 5.2.5 (pinned in pyproject.toml). Only makes the local stand-in faster: every message a send
takes computes the queue's whole attribute map (to read ContentBasedDeduplication), which walks the queue for each
of its three message counts: a batch of ten walked a 1,000-message queue thirty times (bench/README.md, "The local
stand-in's patches"). In a queue operation, each count is made once, on the thread running it (they are
approximate on SQS too; nothing the operation returns shows them). tests/integration/test_local_aws.py (the queue's
counts in the pollers' peek test) fails if moto's counts change under it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from nylorun_local.moto.patching import SQS_OPERATIONS, once, replace

_counts = threading.local()  # `memo`: (queue, count) -> value, while a queue operation runs on this thread
COUNTS = (
    "approximate_number_of_messages",
    "approximate_number_of_messages_delayed",
    "approximate_number_of_messages_not_visible",
)


def _counting(operation: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(operation)
    def counting(*args: Any, **kwargs: Any) -> Any:
        outer = getattr(_counts, "memo", None)
        _counts.memo = {}
        try:
            return operation(*args, **kwargs)
        finally:
            _counts.memo = outer

    return counting


def _counted_once(count: Callable[[Any], int], name: str) -> property:
    def once_per_operation(queue: Any) -> int:
        memo = getattr(_counts, "memo", None)
        if memo is None:  # outside a queue operation (GetQueueAttributes): counted now
            return count(queue)
        key = (id(queue), name)
        if key not in memo:
            memo[key] = count(queue)
        return int(memo[key])

    return property(once_per_operation)


@once
def install() -> None:
    from moto.sqs.models import Queue, SQSBackend

    for name in COUNTS:
        replace(__name__, Queue, name, _counted_once(getattr(Queue, name).fget, name))
    for name in SQS_OPERATIONS:
        replace(__name__, SQSBackend, name, _counting(getattr(SQSBackend, name)))
