"""Dead letters: the queued turns and push deliveries the Runtime gave up on, each tied back to its
task, for an operator to look at (`nylorun admin dlq`) and move back (`nylorun admin redrive`): docs/operate.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

# The Runtime's dead-letter queues: queued turns (ContextQueue → ContextDLQ) and push deliveries (PushQueue →
# PushDLQ), which an operator redrives; table-change batches the publish function could not publish or queue for
# push (PublishDLQ), which are only listed.
DeadLetterQueue = Literal["context", "push", "publish"]
DEAD_LETTER_QUEUES: tuple[DeadLetterQueue, ...] = ("context", "push", "publish")
REDRIVEN_QUEUES: tuple[DeadLetterQueue, ...] = ("context", "push")


@dataclass(frozen=True)
class DeadLetter:
    queue: DeadLetterQueue
    message_id: str  # the dead-letter queue's id of the message (what `redrive --message` names)
    task_id: str  # "" for a publish batch (it names no task) or a body that could not be read: never redriven
    reason: str
    since: str  # ISO 8601 UTC: when the message was put on the queue it now sits in
    config_id: str = ""  # push: the push config it was for
    event_id: str = ""  # push: the event it carries
    # What it carries: "statusUpdate TASK_STATE_COMPLETED", "artifactUpdate" (push); the batch of table changes
    # (publish).
    event: str = ""
    webhook_id: str = ""  # push: the Standard Webhooks id every attempt of it carried (and a redrive keeps)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """The same turn or delivery, whichever message carries it (a redriven one that dead-letters again has a
        new message id)."""
        return (self.queue, self.task_id, self.config_id, self.event_id)


@dataclass(frozen=True)
class DeadLetterLook:
    """What one look at a dead-letter queue saw."""

    queue: DeadLetterQueue
    letters: list[DeadLetter] = field(default_factory=list)
    # ApproximateNumberOfMessages before the look: a FIFO queue hands out at most 10 messages of a message group
    # until they are deleted or visible again, so a look may see fewer than there are.
    approximate_total: int = 0


class DeadLetterQueueRefused(Exception):
    """A dead-letter queue with a redrive policy of its own: receiving its messages (a look) counts towards moving
    them on, so nothing here touches it."""


class DeadLetters(Protocol):
    def look(self, queue: DeadLetterQueue) -> DeadLetterLook:
        """The queue's dead letters, oldest first per message group, each left on the queue and visible again at
        once (nothing is consumed)."""
        ...

    def redrive(
        self, queue: DeadLetterQueue, wanted: Callable[[DeadLetter], bool], before: Callable[[DeadLetter], None]
    ) -> list[DeadLetter]:
        """Move each wanted dead letter of a REDRIVEN_QUEUES queue back to the queue it came from (`before` runs
        first, for each), and leave the others as they were: the letters moved."""
        ...


__all__ = [
    "DEAD_LETTER_QUEUES",
    "REDRIVEN_QUEUES",
    "DeadLetter",
    "DeadLetterLook",
    "DeadLetterQueue",
    "DeadLetterQueueRefused",
    "DeadLetters",
]
