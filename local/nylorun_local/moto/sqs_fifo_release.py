"""moto's FIFO receive delivers a group's later message before its earlier ones once they are visible again.

Written for moto 5.2.5 (pinned in pyproject.toml). Fixes a real moto bug (SQS keeps a group's order): moto
releases a visible-again message only as its receive loop reaches it, while the group's other visible-again
messages still count as in flight, so it skips them and hands out a later one first. Every visible-again message is
released before a receive. tests/integration/test_moto_patches.py shows moto's behaviour without this patch, and
says "moto fixed this: remove the patch" when moto no longer has it.
"""

from __future__ import annotations

from typing import Any

from nylorun_local.moto.patching import once, replace


@once
def install() -> None:
    from moto.sqs.models import SQSBackend

    original_receive = SQSBackend.receive_message

    def receive_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        queue = self.get_queue(queue_name)
        for message in list(queue.pending_messages):
            if message.visible:
                queue.pending_messages.remove(message)
        return original_receive(self, queue_name, *args, **kwargs)

    replace(__name__, SQSBackend, "receive_message", receive_message)
