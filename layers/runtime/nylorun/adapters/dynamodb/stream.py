"""The table's change stream as typed changes (`nylorun.events`): the only place stream records' attribute
values are decoded. Records of other items (messages, journal, contexts) and removals are no changes."""

from __future__ import annotations

import time
from typing import Any

from nylorun.adapters.dynamodb import codec, layout
from nylorun.events import ArtifactChanged, Change, TaskChanged, TaskImage
from nylorun.ports import ExpiredTask, Owner


def _image(record: dict[str, Any], which: str) -> dict[str, Any] | None:
    image = record.get("dynamodb", {}).get(which)
    return codec.from_item(image) if image else None


def decode_change(record: dict[str, Any]) -> Change | None:
    """The change one stream record stands for, if any."""
    new, old = _image(record, "NewImage"), _image(record, "OldImage")
    if new is None:
        return None  # a removal (TTL) is not an A2A event
    sk = str(new.get("SK", ""))
    if sk == "TASK" and "status" in new:
        return TaskChanged(new=TaskImage.from_head(new), old=TaskImage.from_head(old) if old is not None and "status" in old else None)
    if sk.startswith("ART#") and "body" in new:
        return ArtifactChanged(
            task_id=layout.task_id_of(str(new["PK"])),
            body=str(new["body"]),
            old_body=str(old["body"]) if old is not None and "body" in old else None,
        )
    return None


def decode_expiry(record: dict[str, Any]) -> ExpiredTask | None:
    """The task a stream record shows expired: the REMOVE of a task item whose `expiresAt` had passed when it was
    removed (DynamoDB's TTL, or anyone removing an expired task). Any other record, a task item removed before its
    expiry among them, is none: only an ended task ever carries `expiresAt` (docs/operate.md#data-retention)."""
    old = _image(record, "OldImage")
    if record.get("eventName") != "REMOVE" or old is None or old.get("SK") != "TASK" or "expiresAt" not in old:
        return None
    removed_at = record.get("dynamodb", {}).get("ApproximateCreationDateTime") or time.time()
    if int(old["expiresAt"]) > float(removed_at):
        return None
    if not {"taskId", "subject", "agent", "contextId"} <= old.keys():
        # Not a task the Runtime wrote: nothing of ours hangs off it. Raising would fail the record, which is retried
        # and holds up every record behind it on the stream's shard.
        return None
    return ExpiredTask(
        task_id=str(old["taskId"]),
        owner=Owner(subject=str(old["subject"]), agent=str(old["agent"])),
        context_id=str(old["contextId"]),
    )
