"""DynamoTaskStore on moto: the conditional writes that keep turns, answers and pages honest.

Each test uses its own subject (so its own contexts and list partition) on the session's table.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from nylorun.adapters.dynamodb import DynamoTaskStore, derive_task_id
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
from nylorun.profile.extensions import Interaction
from nylorun.protocol.models import Message, Part, Role, TaskState, TaskStatus
from nylorun_local.runtime import LocalRuntime


@pytest.fixture()
def store(local_runtime: LocalRuntime) -> DynamoTaskStore:
    assert local_runtime.runtime is not None
    return local_runtime.runtime.store


@pytest.fixture()
def owner() -> Owner:
    return Owner(subject=f"store-{uuid.uuid4()}", agent="echo")


def msg(message_id: str | None = None, text: str = "hi") -> Message:
    return Message(message_id=message_id or f"m-{uuid.uuid4()}", role=Role.USER, parts=[Part(text=text)])


def turn(owner: Owner, context_id: str | None = None, message_id: str | None = None) -> NewTurn:
    return NewTurn(owner=owner, context_id=context_id or f"ctx-{uuid.uuid4()}", message=msg(message_id))


def opened(store: DynamoTaskStore, new: NewTurn) -> TaskRecord:
    """create_turn on a context that must be free: the new turn takes it at once."""
    record, took = store.create_turn(new, queue=False)
    assert took, f"{new.context_id} was not free"
    return record


def test_create_turn_opens_a_submitted_task_with_a_derived_id_and_busies_the_context(
    store: DynamoTaskStore, owner: Owner
) -> None:
    # Given a fresh context
    new = turn(owner)
    # When its first turn is created
    record, took = store.create_turn(new)
    # Then the task is SUBMITTED, turn 1, holds the context, with the id derived from (owner, context, turn)
    assert took is True
    assert record.task_id == derive_task_id(owner, new.context_id, 1)
    assert record.task_id != derive_task_id(Owner(subject="someone-else", agent="echo"), new.context_id, 1)
    stored = store.get(record.task_id)
    assert stored is not None
    assert (stored.state, stored.turn, stored.owner, stored.version) == (TaskState.SUBMITTED, 1, owner, 1)
    assert [m.message_id for m in stored.history] == [new.message.message_id]
    assert stored.history[0].task_id == record.task_id and stored.history[0].context_id == new.context_id
    # And a second turn in the busy context that may not queue is refused, naming the active task
    with pytest.raises(ContextBusy) as busy:
        store.create_turn(turn(owner, new.context_id), queue=False)
    assert busy.value.active_task_id == record.task_id
    # And one that may queue is turn 2, SUBMITTED, behind the first (it does not take the context)
    queued, took = store.create_turn(turn(owner, new.context_id))
    assert (queued.turn, queued.task_id, took) == (2, derive_task_id(owner, new.context_id, 2), False)
    assert store.context_state(owner, new.context_id)["activeTask"] == record.task_id


def test_a_repeated_message_id_is_a_duplicate_of_the_first_task_and_writes_nothing(
    store: DynamoTaskStore, owner: Owner
) -> None:
    # Given a turn made by message "dup-1"
    first = opened(store, turn(owner, message_id="dup-1"))
    # When the same subject sends "dup-1" again, in another context and in its own (busy) context
    other_context = f"ctx-{uuid.uuid4()}"
    with pytest.raises(DuplicateMessage) as elsewhere:
        store.create_turn(turn(owner, other_context, message_id="dup-1"))
    with pytest.raises(DuplicateMessage) as same_context:
        store.create_turn(turn(owner, first.context_id, message_id="dup-1"))
    # Then both answers are the first task, and no task was made (each transaction wrote nothing)
    assert elsewhere.value.task_id == same_context.value.task_id == first.task_id
    assert store.task_for_message(owner, msg("dup-1").retry_key()) == first.task_id
    assert store.get(derive_task_id(owner, other_context, 1)) is None
    assert opened(store, turn(owner, other_context)).turn == 1  # the context was not left half-open
    assert store.context_state(owner, first.context_id)["turns"] == 1  # no turn 2 was counted
    # And another subject's "dup-1" is its own message
    stranger = Owner(subject=f"store-{uuid.uuid4()}", agent="echo")
    assert opened(store, turn(stranger, message_id="dup-1")).task_id != first.task_id


def test_set_status_with_a_wrong_expectation_conflicts_and_changes_nothing(
    store: DynamoTaskStore, owner: Owner
) -> None:
    # Given a SUBMITTED task
    record = opened(store, turn(owner))
    before = store.get(record.task_id)
    # When a writer expects it WORKING
    with pytest.raises(StateConflict):
        store.set_status(record.task_id, TaskStatus(state=TaskState.COMPLETED), expect={TaskState.WORKING})
    # Then the task is exactly as it was
    after = store.get(record.task_id)
    assert after is not None and before is not None
    assert (after.state, after.version, after.status, len(after.history)) == (
        before.state,
        before.version,
        before.status,
        len(before.history),
    )
    # And a task that does not exist is a conflict too, not a crash
    with pytest.raises(StateConflict):
        store.set_status(str(uuid.uuid4()), TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})


def test_a_terminal_status_frees_the_context_for_the_next_turn(store: DynamoTaskStore, owner: Owner) -> None:
    # Given a turn that works and completes
    first = opened(store, turn(owner))
    store.set_status(first.task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    with pytest.raises(ContextBusy):  # still busy while WORKING
        store.create_turn(turn(owner, first.context_id), queue=False)
    done = store.set_status(first.task_id, TaskStatus(state=TaskState.COMPLETED), expect={TaskState.WORKING})
    assert done.version == 3
    # When the next message arrives in the same context
    second = opened(store, turn(owner, first.context_id))
    # Then it takes the context at once: turn 2 with its own derived id, and the first task stays COMPLETED
    assert second.turn == 2
    assert second.task_id == derive_task_id(owner, first.context_id, 2) != first.task_id
    first_now = store.get(first.task_id)
    assert first_now is not None and first_now.state == TaskState.COMPLETED


def test_list_pages_return_every_task_once_newest_status_first(store: DynamoTaskStore, owner: Owner) -> None:
    # Given five tasks of one subject, in five contexts; the oldest one changes status last
    ids = []
    for _ in range(5):
        ids.append(opened(store, turn(owner)).task_id)
        time.sleep(0.003)  # distinct millisecond timestamps
    store.set_status(ids[0], TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    # When they are listed two at a time
    pages, token = [], None
    for _ in range(5):
        page = store.list_tasks(owner, TaskQuery(page_size=2, page_token=token))
        pages.append(page)
        token = page.next_page_token
        if not token:
            break
    # Then there are 2 + 2 + 1, each task exactly once, newest status first, the last token empty
    assert [len(p.tasks) for p in pages] == [2, 2, 1]
    assert [p.total_size for p in pages] == [5, 5, 5]
    assert [bool(p.next_page_token) for p in pages] == [True, True, False]
    listed = [t.task_id for p in pages for t in p.tasks]
    assert sorted(listed) == sorted(ids)
    assert listed == [ids[0], ids[4], ids[3], ids[2], ids[1]]
    stamps = [t.status.timestamp or "" for p in pages for t in p.tasks]
    assert stamps == sorted(stamps, reverse=True)
    # And another subject sees none of them
    assert store.list_tasks(Owner(subject=f"store-{uuid.uuid4()}", agent="echo"), TaskQuery()).total_size == 0


def test_a_tampered_page_token_is_invalid(store: DynamoTaskStore, owner: Owner) -> None:
    # Given a real token for the first page of three tasks
    contexts = [f"ctx-{uuid.uuid4()}" for _ in range(3)]
    for context_id in contexts:
        opened(store, turn(owner, context_id))
    token = store.list_tasks(owner, TaskQuery(page_size=1)).next_page_token
    assert token
    raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))

    def encode(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    tampered = {
        "garbage": "not-a-token",
        "truncated": token[: len(token) // 2],
        "other fingerprint": encode({**raw, "f": "0" * 16}),
        "non-string key": encode({**raw, "k": {**raw["k"], "PK": 7}}),
        "no key": encode({"f": raw["f"]}),
        "partial key": encode({**raw, "k": {"PK": raw["k"]["PK"]}}),
        "empty key": encode({**raw, "k": {}}),
    }
    for name, bad in tampered.items():
        # When a tampered token is presented
        # Then it is refused as invalid (never a crash or another query's page)
        with pytest.raises(InvalidPageToken):
            store.list_tasks(owner, TaskQuery(page_size=1, page_token=bad))
        assert name
    # And a token is bound to its query: the unfiltered list's token is no good for one context
    with pytest.raises(InvalidPageToken):
        store.list_tasks(owner, TaskQuery(page_size=1, page_token=token, context_id=contexts[0]))


def test_a_page_token_pointing_into_another_subjects_partition_is_invalid(
    store: DynamoTaskStore, owner: Owner
) -> None:
    # Given a real token whose key a caller rewrote to name another subject's partition
    for _ in range(2):
        opened(store, turn(owner))
    token = store.list_tasks(owner, TaskQuery(page_size=1)).next_page_token
    raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw["k"]["GSI1PK"] = "echo#" + "f" * 32
    bad = base64.urlsafe_b64encode(json.dumps(raw).encode()).decode().rstrip("=")
    # When it is presented
    # Then it is an invalid token (a clear -32602 upstream), not a DynamoDB error
    with pytest.raises(InvalidPageToken):
        store.list_tasks(owner, TaskQuery(page_size=1, page_token=bad))


def test_a_page_token_is_bound_to_its_status_timestamp_after(store: DynamoTaskStore, owner: Owner) -> None:
    # Given a token from a list filtered by statusTimestampAfter a minute ago
    for _ in range(2):
        opened(store, turn(owner))
    a_minute_ago = datetime.now(UTC) - timedelta(minutes=1)
    token = store.list_tasks(owner, TaskQuery(page_size=1, status_after=a_minute_ago)).next_page_token
    assert token
    assert (
        len(store.list_tasks(owner, TaskQuery(page_size=1, status_after=a_minute_ago, page_token=token)).tasks) == 1
    )
    # When it is presented with a later statusTimestampAfter (its key now lies outside the query)
    # Then it is an invalid token, not a DynamoDB ValidationException
    with pytest.raises(InvalidPageToken):
        store.list_tasks(
            owner, TaskQuery(page_size=1, status_after=a_minute_ago + timedelta(minutes=2), page_token=token)
        )


def test_no_journal_entry_starts_on_a_canceled_task(store: DynamoTaskStore, owner: Owner) -> None:
    # Given a canceled task
    record = opened(store, turn(owner))
    store.set_status(
        record.task_id, TaskStatus(state=TaskState.CANCELED), expect={TaskState.SUBMITTED, TaskState.WORKING}
    )
    # When the turn tries to start an effect
    with pytest.raises(TurnCanceled):
        store.journal_start(record.task_id, JournalEntry(seq=1, kind="effect", name="charge"))
    # Then nothing was journaled
    assert store.journal(record.task_id) == {}


def test_a_journal_entry_starts_once(store: DynamoTaskStore, owner: Owner) -> None:
    # Given a working task with effect 1 started
    record = opened(store, turn(owner))
    store.set_status(record.task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    store.journal_start(record.task_id, JournalEntry(seq=1, kind="effect", name="charge"))
    # When a replay tries to start it again
    with pytest.raises(StateConflict):
        store.journal_start(record.task_id, JournalEntry(seq=1, kind="effect", name="charge"))
    # Then the one entry stays started, not finished
    entry = store.journal(record.task_id)[1]
    assert (entry.name, entry.finished) == ("charge", False)


def test_an_interaction_is_answered_exactly_once(store: DynamoTaskStore, owner: Owner) -> None:
    # Given a task waiting on question q-1 (journal entry 1)
    record = opened(store, turn(owner))
    store.set_status(record.task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    store.journal_start(record.task_id, JournalEntry(seq=1, kind="interaction", name="question"))
    question = Interaction(interaction_id="q-1", kind="question", prompt="Which one?")
    ask = {"expect": {TaskState.WORKING}, "interaction": question, "interaction_seq": 1}
    store.set_status(record.task_id, TaskStatus(state=TaskState.INPUT_REQUIRED), **ask)  # type: ignore[arg-type]

    def answer(value: str) -> None:
        store.answer_interaction(
            record.task_id,
            "q-1",
            {"value": value},
            msg(text=value),
            TaskStatus(state=TaskState.WORKING),
            owner,
            f"answer-{value}",
        )

    # When it is answered
    answer("first")
    # Then the task works again with the answer journaled
    after = store.get(record.task_id)
    assert after is not None and after.state == TaskState.WORKING and after.interaction is None
    assert store.journal(record.task_id)[1].answer == {"value": "first"}
    # And a second answer is a conflict
    with pytest.raises(StateConflict):
        answer("second")
    # And even if the same interaction is shown open again, the journal keeps the first answer
    store.set_status(record.task_id, TaskStatus(state=TaskState.INPUT_REQUIRED), **ask)  # type: ignore[arg-type]
    with pytest.raises(StateConflict):
        answer("third")
    assert store.journal(record.task_id)[1].answer == {"value": "first"}
    reopened = store.get(record.task_id)
    assert (
        reopened is not None and reopened.state == TaskState.INPUT_REQUIRED
    )  # the failed answer wrote nothing
