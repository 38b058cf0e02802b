"""One stored item that no longer validates never takes down a read (adapters/dynamodb/salvage.py): GetTask,
ListTasks, CancelTask and the operator's `show` answer without it, and a warning says what was left out. Both
stores, each poisoned the way its storage can be: raw items written straight into the DynamoDB table (moto), raw
objects put straight into the in-memory store."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from nylorun.adapters.dynamodb import codec, layout
from nylorun.adapters.memory import InMemoryContextQueue, InMemoryOrchestrator, InMemoryTaskStore
from nylorun.engine.agent import AgentRegistry
from nylorun.ports import NewTurn, Owner, TaskStore
from nylorun.profile.extensions import PROFILE_EXTENSIONS, PlanStep
from nylorun.protocol.models import (
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    TaskState,
    TaskStatus,
)
from nylorun.service.a2a import A2AService, Caller
from nylorun.service.operator import OperatorService
from nylorun.service.scheduler import TurnScheduler
from nylorun.settings import Settings
from nylorun_local.runtime import LocalRuntime

# What a hand edit or an older version left: a plan step in a state no version had, a status message whose part
# carries two contents, a history message with an empty part, an artifact with no parts.
BAD_STEP = {"label": "Pay", "state": "completed"}
BAD_PART = {"text": "paid", "url": "https://example.com/receipt"}
BAD_MESSAGE = {"messageId": "m-bad", "role": "ROLE_AGENT", "parts": [{}]}
BAD_ARTIFACT = {"artifactId": "bad", "name": "secret-report", "parts": []}


@pytest.fixture(params=["memory", "dynamodb"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture()
def store(kind: str, request: pytest.FixtureRequest) -> TaskStore:
    if kind == "memory":
        return InMemoryTaskStore()
    local_runtime: LocalRuntime = request.getfixturevalue("local_runtime")
    assert local_runtime.runtime is not None
    return local_runtime.runtime.store


def poison(store: TaskStore, task_id: str, request: pytest.FixtureRequest) -> None:
    """Write the bad items straight into the store's storage, past every check of its writes."""
    status = {"state": "TASK_STATE_WORKING", "message": {"messageId": "s", "role": "ROLE_AGENT", "parts": [BAD_PART]}}
    plan = [{"label": "Fetch", "state": "done"}, BAD_STEP]
    if isinstance(store, InMemoryTaskStore):
        record = store._tasks[task_id].record
        record.plan = [PlanStep(label="Fetch", state="done"), PlanStep.model_construct(**BAD_STEP)]
        message = Message.model_construct(message_id="s", role=Role.AGENT, parts=[Part.model_construct(**BAD_PART)])
        record.status = TaskStatus.model_construct(state=TaskState.WORKING, message=message)
        record.history.append(Message.model_construct(message_id="m-bad", role=Role.AGENT, parts=[Part.model_construct()]))
        record.artifacts.append(Artifact.model_construct(artifact_id="bad", name="secret-report", parts=[]))
        return
    local_runtime: LocalRuntime = request.getfixturevalue("local_runtime")
    assert local_runtime.runtime is not None
    db, table = local_runtime.runtime.client("dynamodb"), local_runtime.stack.table_name
    db.update_item(
        TableName=table, Key=codec.to_item(layout.task(task_id)), UpdateExpression="SET #p = :p, #s = :s",
        ExpressionAttributeNames={"#p": "plan", "#s": "status"},
        ExpressionAttributeValues=codec.to_item({":p": json.dumps(plan), ":s": json.dumps(status)}),
    )
    db.put_item(TableName=table, Item=codec.to_item({**layout.message(task_id, 9), "body": json.dumps(BAD_MESSAGE)}))
    db.put_item(TableName=table, Item=codec.to_item(
        {**layout.artifact(task_id, "bad"), "body": json.dumps(BAD_ARTIFACT), "order": 9}))


def test_a_task_holding_items_that_no_longer_validate_still_reads_lists_cancels_and_shows(
    store: TaskStore, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a WORKING task with a good plan step, a good artifact and the caller's message, poisoned with a bad
    # plan step, a bad status message, a bad history message and a bad artifact
    owner = Owner(subject=f"salvage-{uuid.uuid4()}", agent="echo")
    new = NewTurn(owner=owner, context_id="ctx", message=Message(message_id="m-1", role=Role.USER, parts=[Part(text="go")]))
    record, _ = store.create_turn(new, queue=False)
    task_id = record.task_id
    store.set_status(task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    store.put_artifact(task_id, Artifact(artifact_id="good", name="receipt", parts=[Part(text="ok")]))
    poison(store, task_id, request)
    orchestrator = InMemoryOrchestrator()
    scheduler = TurnScheduler(store, orchestrator, InMemoryContextQueue())
    service = A2AService(store, orchestrator, AgentRegistry([]), Settings(a2a_wait_ms=0, auth="none"), scheduler)
    caller = Caller(subject=owner.subject, agent=owner.agent, extensions=tuple(PROFILE_EXTENSIONS))

    with caplog.at_level(logging.WARNING):
        # When the caller gets and lists the task
        got = service.get_task(caller, GetTaskRequest(id=task_id))
        listed = service.list_tasks(caller, ListTasksRequest(include_artifacts=True))
        # And the operator shows it
        shown = OperatorService(store, orchestrator, scheduler).show(task_id)  # type: ignore[arg-type]
        # And the caller cancels it
        canceled = service.cancel_task(caller, CancelTaskRequest(id=task_id))

    # Then each answers, with every bad item left out and the good ones kept
    assert got["status"]["state"] == "TASK_STATE_WORKING" and "message" not in got["status"]
    assert got["status"]["timestamp"]  # the task item's own, written with the status
    assert [m["messageId"] for m in got["history"]] == ["m-1"]
    assert [a["artifactId"] for a in got["artifacts"]] == ["good"]
    assert [t["id"] for t in listed["tasks"]] == [task_id]
    assert shown["task"]["state"] == "TASK_STATE_WORKING" and shown["task"]["statusText"] == ""
    # And CancelTask still cancels
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    after = store.get(task_id)
    assert after is not None and after.state == TaskState.CANCELED
    assert [step.label for step in after.plan] == ["Fetch"]
    # And a warning names the task and each item left out, never its content
    left_out = [r for r in caplog.records if r.getMessage() == "stored item left out of a read"]
    items = {getattr(r, "item", None) for r in left_out}
    assert {"plan step 1", "status", "history message 1", "artifact 1"} <= items, items
    assert all(getattr(r, "task_id", None) == task_id for r in left_out)
    assert "secret-report" not in caplog.text and "example.com" not in caplog.text
