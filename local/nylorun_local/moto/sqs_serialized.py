"""moto's SQS queues are plain lists changed by concurrent requests: a message sent during a delete is lost.

Written for moto 5.2.5 (pinned in pyproject.toml). Fixes a real moto bug (SQS loses no message and hands a FIFO
group to one receiver at a time): a delete rebuilds the queue's list, so a message sent meanwhile (appended to the
old list) is lost; and a FIFO group is marked in flight only as a receive hands out its messages, so two receives at
once could both take one group. One queue operation runs at a time; a long poll waits between its tries outside the
lock (held through the wait, it would stop every other queue operation, the pollers', for that long).
tests/integration/test_moto_patches.py shows both without this patch, each second request made from inside the first
(test_a_message_sent_during_a_delete_is_kept, test_two_receives_at_once_never_both_take_one_fifo_group), and says
"moto fixed this: remove the patch" when moto no longer has them; tests/integration/test_local_aws.py covers the
long poll and the pollers' peek, and tests/e2e/test_push.py the concurrent sends and deletes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from nylorun_local.moto.patching import SQS_OPERATIONS, once, replace, sqs_lock
from nylorun_local.turns import TURNS


def _serialized(operation: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(operation)
    def serialized(*args: Any, **kwargs: Any) -> Any:
        with sqs_lock:
            return operation(*args, **kwargs)

    return serialized


@once
def install() -> None:
    from moto.sqs.models import SQSBackend

    original_receive = SQSBackend.receive_message

    def receive_message(self: Any, queue_name: str, count: int, wait_seconds_timeout: int, *args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + wait_seconds_timeout
        while True:
            with sqs_lock:
                received = original_receive(self, queue_name, count, 0, *args, **kwargs)
            if received or time.monotonic() >= deadline:
                return received
            TURNS.sleep(0.05)  # asked over HTTP, the request lets the next one in meanwhile

    replace(__name__, SQSBackend, "receive_message", receive_message)
    for name in SQS_OPERATIONS:
        replace(__name__, SQSBackend, name, _serialized(getattr(SQSBackend, name)))
