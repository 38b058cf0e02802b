"""The table's change stream → Runtime events (nylorun/events.py, service/publish.py), as a consumer of the
event bus sees them: Task Status Changed, Task Plan Updated, Task Artifact Updated and Turn Usage, each with an
eventId that is the same for a record delivered twice. Stream records are built as DynamoDB stream images of
the task items the in-memory store holds (the same plain values as the DynamoDB store's items)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from boto3.dynamodb.types import TypeSerializer
from nylorun.adapters.dynamodb import decode_change
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.events import (
    ARTIFACT_UPDATED,
    PLAN_UPDATED,
    STATUS_CHANGED,
    TURN_USAGE,
    RuntimeEvent,
)
from nylorun.ports import NewTurn, StoredPushConfig
from nylorun.profile.extensions import TELEMETRY, PlanStep
from nylorun.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from nylorun.service.publish import EventPublisher
from unit_support import OWNER, message

SAMPLE = Path(__file__).parents[2] / "events" / "publish-dynamodb-stream.json"
_serializer = TypeSerializer()


def stream_record(new: dict[str, Any] | None, old: dict[str, Any] | None = None) -> dict[str, Any]:
    """One DynamoDB stream record (NEW_AND_OLD_IMAGES) of an item's change."""
    images = {name: {k: _serializer.serialize(v) for k, v in item.items()}
              for name, item in (("NewImage", new), ("OldImage", old)) if item is not None}
    name = "REMOVE" if new is None else "INSERT" if old is None else "MODIFY"
    return {"eventName": name, "eventSource": "aws:dynamodb", "dynamodb": images}


class Bus:
    def __init__(self) -> None:
        self.events: list[RuntimeEvent] = []

    def publish(self, events: Any) -> None:
        self.events.extend(events)


class Task:
    """One task in the in-memory store, and its table items as the stream shows them."""

    def __init__(self) -> None:
        self.store = InMemoryTaskStore()
        record, _ = self.store.create_turn(NewTurn(owner=OWNER, context_id="c1", message=message("hi")))
        self.id = record.task_id

    def item(self) -> dict[str, Any]:
        head, record = self.store.head(self.id), self.store.get(self.id)
        assert head is not None and record is not None
        plan = json.dumps([step.wire() for step in record.plan])
        return {**head, "PK": f"TASK#{self.id}", "SK": "TASK", "plan": plan}

    def change(self, state: TaskState, *, text: str | None = None, plan: list[PlanStep] | None = None,
               metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Set the status and return the stream record of that write."""
        before = self.item()
        reply = None
        if text is not None:
            reply = Message(message_id="a1", role=Role.AGENT, parts=[Part(text=text)], metadata=metadata,
                            extensions=list(metadata or {}) or None)
        self.store.set_status(self.id, TaskStatus(state=state, message=reply), expect=set(TaskState), plan=plan)
        return stream_record(self.item(), before)

    def artifact_item(self, text: str, order: int = 1) -> dict[str, Any]:
        body = json.dumps(Artifact(artifact_id="report", name="report", parts=[Part(text=text)]).wire())
        return {"PK": f"TASK#{self.id}", "SK": "ART#report", "body": body, "order": order}


class Heads:
    """A store that knows only the heads it is given."""

    def __init__(self, heads: dict[str, dict[str, Any]] | None) -> None:
        self._heads = heads or {}

    def head(self, task_id: str) -> dict[str, Any] | None:
        return self._heads.get(task_id)


def from_stream_record(record: dict[str, Any], heads: dict[str, dict[str, Any]] | None = None) -> list[RuntimeEvent]:
    """The events the publisher makes of one stream record (decoded by the DynamoDB adapter)."""
    bus = Bus()
    EventPublisher(Heads(heads), bus, decode_change).publish_record(record)
    return bus.events


def kinds(events: list[RuntimeEvent]) -> list[str]:
    return [e.detail_type for e in events]


def test_the_sample_stream_record_of_a_completed_turn_is_a_status_change_and_its_usage() -> None:
    # Given the sample stream record (a task going from WORKING to COMPLETED)
    record = json.loads(SAMPLE.read_text())["Records"][0]
    bus = Bus()
    # When the publisher handles it
    count = EventPublisher(InMemoryTaskStore(), bus, decode_change).publish_record(record)
    # Then a consumer gets the new status and the turn's usage, addressed to the task's subject and agent
    assert count == 2 and kinds(bus.events) == [STATUS_CHANGED, TURN_USAGE]
    status, usage = (e.detail for e in bus.events)
    assert (status["subject"], status["agent"], status["state"]) == ("user-sample-0001", "echo", "TASK_STATE_COMPLETED")
    assert status["statusUpdate"]["status"]["message"]["parts"] == [{"text": "hello"}]
    assert usage["traceId"] == "1-674b5a00-0123456789abcdef01234567" and usage["steps"] == 0


def test_a_record_delivered_twice_makes_the_same_event_ids_and_the_next_change_new_ones() -> None:
    # Given a task that started working with a plan, then changed its plan
    task = Task()
    working = task.change(TaskState.WORKING, text="Working", plan=[PlanStep(label="Draft")])
    marked = task.change(TaskState.WORKING, text="Drafted", plan=[PlanStep(label="Draft", state="done")])
    # When the stream delivers the first record twice, then the second
    first, again, second = (from_stream_record(r) for r in (working, working, marked))
    # Then the duplicate has the same ids (a consumer drops it), the next change has new ones
    assert kinds(first) == [STATUS_CHANGED, PLAN_UPDATED]
    assert [e.detail["eventId"] for e in again] == [e.detail["eventId"] for e in first]
    assert not {e.detail["eventId"] for e in second} & {e.detail["eventId"] for e in first}
    assert second[1].detail["plan"] == [{"label": "Draft", "state": "done"}]


def test_a_new_task_is_announced_and_a_task_without_a_plan_has_no_plan_event() -> None:
    task = Task()
    events = from_stream_record(stream_record(task.item()))
    assert kinds(events) == [STATUS_CHANGED] and events[0].detail["state"] == "TASK_STATE_SUBMITTED"


def test_a_write_that_changes_neither_status_nor_plan_announces_nothing() -> None:
    # Given a task item rewritten with only its bookkeeping changed (a message appended, say)
    task = Task()
    before = task.item()
    after = {**before, "msgSeq": before["msgSeq"] + 1, "version": before["version"] + 1}
    # Then no event
    assert from_stream_record(stream_record(after, before)) == []


def test_a_turn_ending_reports_its_usage_once_even_when_the_ended_task_is_written_again() -> None:
    # Given a turn that ended with telemetry on its final message
    task = Task()
    task.change(TaskState.WORKING)
    telemetry = {"steps": 2, "tokens": 120, "costUsd": 0.03, "traceId": "1-abc-def"}
    ended = task.change(TaskState.COMPLETED, text="Done.", metadata={TELEMETRY: telemetry})
    # When the stream delivers that record twice, and a later write of the ended task
    later_before = task.item()
    later = stream_record({**later_before, "version": later_before["version"] + 1, "statusTs": "later"},
                          later_before)
    events = [from_stream_record(r) for r in (ended, ended, later)]
    # Then the usage is reported from the final telemetry, with one id for both deliveries, and not again after
    usage = [e.detail for e in events[0] if e.detail_type == TURN_USAGE]
    assert usage and {k: usage[0][k] for k in ("state", "steps", "tokens", "costUsd", "traceId")} == {
        "state": "TASK_STATE_COMPLETED", "steps": 2, "tokens": 120, "costUsd": 0.03, "traceId": "1-abc-def"}
    assert [e.detail["eventId"] for e in events[1] if e.detail_type == TURN_USAGE] == [usage[0]["eventId"]]
    assert TURN_USAGE not in kinds(events[2])


def test_an_oversized_status_message_is_announced_without_its_parts() -> None:
    task = Task()
    record = task.change(TaskState.WORKING, text="x" * 250_000)
    [event] = from_stream_record(record)
    parts = event.detail["statusUpdate"]["status"]["message"]["parts"]
    assert parts == [{"text": "(too large; read it with GetTask)"}] and len(json.dumps(event.detail)) < 200_000


def test_an_artifact_is_announced_to_its_tasks_owner_once_per_content() -> None:
    # Given a task and its artifact item
    task = Task()
    bus = Bus()
    publisher = EventPublisher(task.store, bus, decode_change)
    first = task.artifact_item("v1")
    # When the artifact is written, delivered twice, moved without a change, then rewritten
    for record in (stream_record(first), stream_record(first), stream_record({**first, "order": 2}, first),
                   stream_record(task.artifact_item("v2"), first)):
        publisher.publish_record(record)
    # Then the consumer gets one event per content, the duplicate with the same id, each for the task's owner
    assert kinds(bus.events) == [ARTIFACT_UPDATED] * 3
    ids = [e.detail["eventId"] for e in bus.events]
    assert ids[0] == ids[1] != ids[2]
    detail = bus.events[2].detail
    assert (detail["subject"], detail["agent"], detail["taskId"]) == (OWNER.subject, OWNER.agent, task.id)
    assert detail["artifactUpdate"]["artifact"]["parts"] == [{"text": "v2"}]


def test_an_oversized_artifact_is_announced_without_its_parts() -> None:
    task = Task()
    [event] = from_stream_record(stream_record(task.artifact_item("y" * 250_000)), {task.id: task.store.head(task.id) or {}})
    assert event.detail["artifactUpdate"]["artifact"]["parts"] == [{"text": "(too large)"}]


def test_removals_and_items_other_than_tasks_and_artifacts_announce_nothing() -> None:
    task = Task()
    message_item = {"PK": f"TASK#{task.id}", "SK": "MSG#00000001", "body": "{}"}
    assert from_stream_record(stream_record(None, task.item())) == []  # the TTL sweep
    assert from_stream_record(stream_record(message_item)) == []


def test_a_failed_publish_raises_so_the_stream_delivers_the_record_again() -> None:
    class Down:
        def publish(self, events: Any) -> None:
            raise ConnectionError("EventBridge unavailable")

    with pytest.raises(ConnectionError):
        EventPublisher(InMemoryTaskStore(), Down(), decode_change).publish_record(stream_record(Task().item()))


class PushQueue:
    """The push queue as the publisher uses it: each event it queues for its task's fan-out, in order."""

    def __init__(self) -> None:
        self.fan_outs: list[tuple[str, str, str]] = []  # (task id, event id, detail-type)

    def send_fan_out(self, task_id: str, event_id: str, event: dict[str, Any]) -> None:
        self.fan_outs.append((task_id, event_id, event["detail-type"]))


def test_only_the_pushed_events_of_a_task_with_push_configs_are_queued_for_push_in_order() -> None:
    # Given two tasks in one store, the first with a push config, the second without
    pushed, quiet = Task(), Task()
    quiet.store = pushed.store
    quiet.id = quiet.store.create_turn(NewTurn(owner=OWNER, context_id="c2", message=message("hi")))[0].task_id
    config = TaskPushNotificationConfig(id="cfg", task_id=pushed.id, url="https://hooks.example/a")
    pushed.store.put_push_config(pushed.id, StoredPushConfig(config=config, created_at="2026-12-02T00:00:00Z"))
    bus, queue = Bus(), PushQueue()
    publisher = EventPublisher(pushed.store, bus, decode_change, queue)
    # When each task is created, works, gets an artifact and completes (the first's changes, then the second's)
    for task in (pushed, quiet):
        for record in (stream_record(task.item()), task.change(TaskState.WORKING, text="on it"),
                       stream_record(task.artifact_item("v1")), task.change(TaskState.COMPLETED, text="done")):
            publisher.publish_record(record)
    # Then both tasks' events are on the bus
    assert {e.detail["taskId"] for e in bus.events} == {pushed.id, quiet.id}
    # And only the first task's status (but SUBMITTED: its creator has it) and artifact events are queued for push,
    # in the order they happened, each for its own task's fan-out (no message group shared by tasks)
    expected = [e for e in bus.events if e.detail["taskId"] == pushed.id and e.detail_type != TURN_USAGE][1:]
    assert [(e.detail_type, e.detail.get("state")) for e in expected] == [
        (STATUS_CHANGED, "TASK_STATE_WORKING"), (ARTIFACT_UPDATED, None), (STATUS_CHANGED, "TASK_STATE_COMPLETED"),
    ]  # fmt: skip
    assert queue.fan_outs == [(pushed.id, e.detail["eventId"], e.detail_type) for e in expected]


def _counting(record: dict[str, Any], configs: int) -> dict[str, Any]:
    """The record with the task item's push config count in its images, as the DynamoDB store's items carry it."""
    for image in record["dynamodb"].values():
        image["pushConfigs"] = _serializer.serialize(configs)
    return record


def test_a_status_change_whose_image_counts_the_push_configs_is_queued_by_that_count_without_a_read() -> None:
    # Given a task with one push config, its store counting every read of its configs
    task = Task()
    config = TaskPushNotificationConfig(id="cfg", task_id=task.id, url="https://hooks.example/a")
    task.store.put_push_config(task.id, StoredPushConfig(config=config, created_at="2026-12-02T00:00:00Z"))
    reads: list[str] = []
    read_configs = task.store.push_configs_after

    def counted(task_id: str, after: str | None, limit: int) -> list[StoredPushConfig]:
        reads.append(task_id)
        return read_configs(task_id, after, limit)

    task.store.push_configs_after = counted  # type: ignore[method-assign]
    queue = PushQueue()
    publisher = EventPublisher(task.store, Bus(), decode_change, queue)
    # When it works in a write whose image counts no configs (the config came after it), then asks for input in
    # one that counts one
    publisher.publish_record(_counting(task.change(TaskState.WORKING, text="on it"), 0))
    publisher.publish_record(_counting(task.change(TaskState.INPUT_REQUIRED, text="more?"), 1))
    # Then only INPUT_REQUIRED is queued for push (the WORKING event predates the config), and no config was read
    assert [kind for _, _, kind in queue.fan_outs] == [STATUS_CHANGED]
    assert reads == []
    # And an image from before the count was kept (no pushConfigs) still reads the table: one config, queued
    publisher.publish_record(task.change(TaskState.COMPLETED, text="done"))
    assert reads == [task.id] and len(queue.fan_outs) == 2
