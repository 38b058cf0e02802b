"""The in-memory task store keeps the TaskStore contract the DynamoDB store keeps (the benchmarks measure the
protocol layer on it): turns take a context or queue, the next queued turn claims it in order, ListTasks pages
newest first with tokens bound to the query, and status changes are conditional."""

from __future__ import annotations

import pytest
from nylorun.adapters.dynamodb import derive_task_id
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.ports import (
    ContextBusy,
    DuplicateMessage,
    InvalidPageToken,
    JournalEntry,
    NewTurn,
    Owner,
    StateConflict,
    TaskQuery,
    TaskRecord,
    TurnCanceled,
)
from nylorun.protocol.models import Message, Part, Role, TaskState, TaskStatus

ALICE = Owner(subject="alice", agent="echo")


def turn(
    store: InMemoryTaskStore, context: str, message_id: str, owner: Owner = ALICE
) -> tuple[TaskRecord, bool]:
    message = Message(message_id=message_id, role=Role.USER, parts=[Part(text=message_id)])
    return store.create_turn(NewTurn(owner=owner, context_id=context, message=message))


def finish(store: InMemoryTaskStore, task_id: str, timestamp: str | None = None) -> None:
    store.set_status(task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    store.set_status(
        task_id, TaskStatus(state=TaskState.COMPLETED, timestamp=timestamp), expect={TaskState.WORKING}
    )


def test_first_turn_takes_the_context_and_later_ones_queue() -> None:
    store = InMemoryTaskStore()

    first, took_first = turn(store, "c1", "m1")
    second, took_second = turn(store, "c1", "m2")

    assert (took_first, took_second) == (True, False)
    assert first.task_id == derive_task_id(ALICE, "c1", 1)  # the same ids as the DynamoDB store
    assert second.turn == 2 and second.state == TaskState.SUBMITTED
    assert store.context_state(ALICE, "c1") == {"turns": 2, "started": 1, "activeTask": first.task_id}
    with pytest.raises(ContextBusy) as busy:
        store.create_turn(
            NewTurn(ALICE, "c1", Message(message_id="m3", role=Role.USER, parts=[Part(text="x")])),
            queue=False,
        )
    assert busy.value.active_task_id == first.task_id


def test_a_repeated_message_id_answers_with_the_first_task() -> None:
    store = InMemoryTaskStore()
    first, _ = turn(store, "c1", "m1")

    with pytest.raises(DuplicateMessage) as duplicate:
        turn(store, "c2", "m1")

    assert duplicate.value.task_id == first.task_id
    key = Message(message_id="m1", role=Role.USER, parts=[Part(text="m1")]).retry_key()
    assert store.task_for_message(ALICE, key) == first.task_id
    assert store.task_for_message(Owner(subject="bob", agent="echo"), key) is None


def test_the_next_queued_turn_claims_the_context_in_order_passing_over_canceled_ones() -> None:
    store = InMemoryTaskStore()
    first, _ = turn(store, "c1", "m1")
    second, _ = turn(store, "c1", "m2")
    third, _ = turn(store, "c1", "m3")
    store.set_status(second.task_id, TaskStatus(state=TaskState.CANCELED), expect={TaskState.SUBMITTED})

    assert store.claim_next(ALICE, "c1") is None  # the first turn still holds it
    finish(store, first.task_id)  # a terminal status frees the context

    assert store.claim_next(ALICE, "c1") == third.task_id
    assert store.claim_next(ALICE, "c1") is None
    assert store.context_state(ALICE, "c1") == {"turns": 3, "started": 3, "activeTask": third.task_id}


def test_list_pages_newest_status_first_with_tokens_bound_to_the_query() -> None:
    store = InMemoryTaskStore()
    ids = [turn(store, f"c{i}", f"m{i}")[0].task_id for i in range(5)]
    turn(store, "c0", "other-owner", Owner(subject="bob", agent="echo"))
    finish(store, ids[0], timestamp="2999-01-01T00:00:00.000Z")  # its status is now the newest

    seen: list[TaskRecord] = []
    token: str | None = None
    while True:
        page = store.list_tasks(ALICE, TaskQuery(page_size=2, page_token=token))
        assert page.total_size == 5
        seen += page.tasks
        if not page.next_page_token:
            break
        token = page.next_page_token

    assert sorted(t.task_id for t in seen) == sorted(ids)
    keys = [(t.status.timestamp, t.task_id) for t in seen]
    assert keys == sorted(keys, reverse=True) and seen[0].task_id == ids[0]
    assert all(t.history == [] for t in seen)  # like the index: GetTask reads the history
    first_page = store.list_tasks(ALICE, TaskQuery(page_size=2))
    with pytest.raises(InvalidPageToken):
        store.list_tasks(
            ALICE, TaskQuery(page_size=2, state=TaskState.SUBMITTED, page_token=first_page.next_page_token)
        )
    with pytest.raises(InvalidPageToken):
        store.list_tasks(ALICE, TaskQuery(page_token="not-a-token"))
    only = store.list_tasks(ALICE, TaskQuery(context_id="c3", state=TaskState.SUBMITTED))
    assert [t.task_id for t in only.tasks] == [ids[3]] and only.next_page_token == ""


def test_status_changes_are_conditional_and_cancel_stops_effects() -> None:
    store = InMemoryTaskStore()
    task, _ = turn(store, "c1", "m1")

    with pytest.raises(StateConflict):
        store.set_status(task.task_id, TaskStatus(state=TaskState.COMPLETED), expect={TaskState.WORKING})
    store.set_status(task.task_id, TaskStatus(state=TaskState.CANCELED), expect={TaskState.SUBMITTED})
    with pytest.raises(StateConflict):
        store.set_status(task.task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    with pytest.raises(TurnCanceled):
        store.journal_start(task.task_id, JournalEntry(seq=1, kind="effect", name="refund"))
    with pytest.raises(StateConflict):
        store.set_status("no-such-task", TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})


def test_records_handed_out_are_copies() -> None:
    store = InMemoryTaskStore()
    task, _ = turn(store, "c1", "m1")

    got = store.get(task.task_id)
    assert got is not None
    got.history.clear()
    got.status = TaskStatus(state=TaskState.FAILED)

    again = store.get(task.task_id)
    assert again is not None and len(again.history) == 1 and again.state == TaskState.SUBMITTED
