"""moto hands a FIFO queue's messages out strictly in the order sent, across message groups: a group handed back keeps its place.

Written for moto 5.2.5 (pinned in pyproject.toml). Not a moto bug (SQS promises no order across groups), nor a
speed-up: the local stand-in's choice that groups take turns, so a group whose message is handed back (a push
fan-out step) is not taken again before every group that queued after it. A group waits in line from its first
message, and each time it is served it goes to the back (a stable sort: a group's own messages keep their order).
tests/integration/test_local_aws.py (the pollers' peek agrees with a receive) and tests/e2e/test_push.py fail if
moto's queue changes under it.
"""

from __future__ import annotations

import itertools
from typing import Any

from nylorun_local.moto.patching import once, replace


@once
def install() -> None:
    from moto.sqs.models import SQSBackend

    original_receive = SQSBackend.receive_message
    group_turns: dict[str, dict[str, int]] = {}
    turn_counter = itertools.count()

    def rotate_groups(queue: Any) -> dict[str, int]:
        previous = group_turns.get(queue.name, {})
        turns = {}
        for message in queue._messages:
            group = message.group_id or ""
            if group not in turns:
                turns[group] = previous[group] if group in previous else next(turn_counter)
        group_turns[queue.name] = turns
        queue._messages.sort(key=lambda message: turns[message.group_id or ""])
        return turns

    def receive_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        queue = self.get_queue(queue_name)
        if not queue.fifo_queue:
            return original_receive(self, queue_name, *args, **kwargs)
        turns = rotate_groups(queue)
        received = original_receive(self, queue_name, *args, **kwargs)
        for message in received:
            turns[message.group_id or ""] = next(turn_counter)
        return received

    replace(__name__, SQSBackend, "receive_message", receive_message)
