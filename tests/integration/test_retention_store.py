"""Retention in both stores (docs/operate.md#data-retention): only the status that ends a task sets its
expiry; an expired task is gone for readers before TTL deletes it; its remains go only once it has expired."""

from __future__ import annotations

import time
import uuid

import pytest
from nylorun.adapters.dynamodb import DynamoTaskStore
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.ports import JournalEntry, NewTurn, Owner, StoredPushConfig, TaskQuery, TaskStore
from nylorun.protocol.models import Message, Part, Role, TaskPushNotificationConfig, TaskState, TaskStatus
from nylorun_local.runtime import LocalRuntime

RETENTION = 2


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> TaskStore:
    if request.param == "memory":
        return InMemoryTaskStore(retention_seconds=RETENTION)
    local: LocalRuntime = request.getfixturevalue("local_runtime")
    assert local.runtime is not None and local.stack is not None
    return DynamoTaskStore(local.runtime.client("dynamodb"), local.stack.table_name, retention_seconds=RETENTION)


def a_task(store: TaskStore) -> tuple[str, Owner, str]:
    """A new task, its owner, and its message's dedupe key."""
    owner = Owner(subject=f"ret-{uuid.uuid4()}", agent="echo")
    message = Message(message_id=f"m-{uuid.uuid4()}", role=Role.USER, parts=[Part(text="hi")])
    record, _ = store.create_turn(NewTurn(owner=owner, context_id=f"ctx-{uuid.uuid4()}", message=message))
    return record.task_id, owner, message.retry_key()


def test_only_the_status_that_ends_a_task_sets_its_expiry(store: TaskStore) -> None:
    # Given a task that works, waits for an answer, works again
    task_id, _, _ = a_task(store)
    for state in (TaskState.WORKING, TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED, TaskState.WORKING):
        store.set_status(task_id, TaskStatus(state=state), expect=set(TaskState))
        # Then no open state ever carries an expiry
        head = store.head(task_id)
        assert head is not None and "expiresAt" not in head, state
    # When it completes
    before = int(time.time())
    ended = store.set_status(task_id, TaskStatus(state=TaskState.COMPLETED), expect={TaskState.WORKING})
    # Then it expires the retention after the moment it ended (whole seconds, as DynamoDB's TTL reads it), and says so
    head = store.head(task_id)
    assert head is not None and before + RETENTION <= int(head["expiresAt"]) <= int(time.time()) + RETENTION
    assert ended.expires_at == head["expiresAt"]
    time.sleep(RETENTION + 1.1)  # leave nothing expiring behind in the shared table
    store.remove_remains(task_id, [])


def test_an_expired_task_is_gone_for_readers_and_then_its_remains_go(store: TaskStore) -> None:
    # Given an ended task with a journal, a push config and a dedupe record, and an open task
    task_id, owner, first_message = a_task(store)
    open_id, open_owner, _ = a_task(store)
    assert store.task_for_message(owner, first_message) == task_id
    store.journal_start(task_id, JournalEntry(seq=1, kind="effect", name="e"))
    store.put_push_config(task_id, StoredPushConfig(
        config=TaskPushNotificationConfig(id="c1", task_id=task_id, url="https://h.example.com/x"), created_at="t"))
    store.set_status(task_id, TaskStatus(state=TaskState.CANCELED), expect=set(TaskState))
    # When its remains are removed before it has expired
    removed_early = store.remove_remains(task_id, [])
    # Then nothing goes
    assert removed_early == 0 and store.get(task_id) is not None and store.list_push_configs(task_id)
    # When the retention passes
    time.sleep(RETENTION + 1.1)
    # Then readers find nothing, before any TTL deleted it
    assert store.get(task_id) is None and store.head(task_id) is None
    assert store.list_tasks(owner, TaskQuery()).tasks == []
    # And its remains go: journal, config, dedupe record (a repeat of its message makes a new task then)
    assert store.remove_remains(task_id, []) > 0
    assert store.journal(task_id) == {} and store.list_push_configs(task_id) == []
    assert store.task_for_message(owner, first_message) is None
    assert store.remove_remains(task_id, []) == 0  # a repeated removal finds nothing left
    # And the open task is untouched
    assert store.get(open_id) is not None and [t.task_id for t in store.list_tasks(open_owner, TaskQuery()).tasks] == [open_id]
    assert store.remove_remains(open_id, []) == 0
