"""The table's change stream as typed changes (`nylorun.events`): the only place stream records' attribute
values are decoded. Records of other items (messages, journal, contexts) and removals are no changes."""

from __future__ import annotations

from typing import Any

from nylorun.adapters.dynamodb import codec, layout
from nylorun.events import ArtifactChanged, Change, TaskChanged, TaskImage


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
