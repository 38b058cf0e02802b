"""A stored status that no longer validates reads as what of it still does (adapters/dynamodb/salvage.py): the
decision for a status with an unknown state, which no store write can make, so it is checked on the task item."""

from __future__ import annotations

import json

import pytest
from nylorun.adapters.dynamodb import codec
from nylorun.ports import Owner, TaskRecord
from nylorun.protocol.models import TaskState, TaskStatus

TS = "2026-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    ("state_attribute", "reads_as"),
    [("TASK_STATE_INPUT_REQUIRED", TaskState.INPUT_REQUIRED), ("TASK_STATE_DONE", TaskState.WORKING)],
    ids=["the item's state attribute", "WORKING when that is unknown too"],
)
def test_a_status_with_an_unknown_state_reads_in_the_items_state_or_working(
    state_attribute: str, reads_as: TaskState
) -> None:
    # Given a task item whose status was written by hand with a state A2A has not
    record = TaskRecord(task_id="t1", context_id="c1", owner=Owner(subject="alice", agent="a"), turn=1,
                        status=TaskStatus(state=TaskState.INPUT_REQUIRED, timestamp=TS))
    item = codec.task_item(record) | {"status": json.dumps({"state": "TASK_STATE_DONE"}), "state": state_attribute}
    # When it is read
    read = codec.task_record(item)
    # Then its status is the fallback, not terminal (it can be canceled), timestamped as the item was written
    assert read.status == TaskStatus(state=reads_as, timestamp=TS)
