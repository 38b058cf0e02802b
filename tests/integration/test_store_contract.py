"""The TaskStore contract, kept by both stores: the in-memory store and the DynamoDB store on moto.

Every test runs against each (`store` is parametrized); the in-memory store is held to the DynamoDB store's
behaviour: the same errors, the same JSON round trips, the same paging. Each test uses its own subject (so its
own contexts and list partition); the DynamoDB store shares the session's table.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from nylorun.adapters.dynamodb import DynamoTaskStore, codec, derive_task_id
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.ports import (
    ContextBusy,
    DuplicateMessage,
    InteractionClosed,
    InvalidPageToken,
    JournalEntry,
    NewTurn,
    NotInState,
    OperatorStore,
    Owner,
    QuotaExceeded,
    Quotas,
    Resolution,
    Resolved,
    StateConflict,
    StoredPushConfig,
    StoreUnavailable,
    TaskQuery,
    TaskRecord,
    TaskStore,
    TooLarge,
    TurnCanceled,
    Uncertainty,
    VersionConflict,
)
from nylorun.profile.extensions import Interaction
from nylorun.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from nylorun_local.runtime import LocalRuntime

SMALL_BUDGET = 200 * 1024  # a task budget small enough to reach in a test


def make_store(kind: str, request: pytest.FixtureRequest, max_task_bytes: int | None = None) -> TaskStore:
    if kind == "memory":
        return InMemoryTaskStore() if max_task_bytes is None else InMemoryTaskStore(max_task_bytes)
    local_runtime: LocalRuntime = request.getfixturevalue("local_runtime")
    assert local_runtime.runtime is not None
    if max_task_bytes is None:
        return local_runtime.runtime.store
    return DynamoTaskStore(local_runtime.runtime.client("dynamodb"), local_runtime.stack.table_name, max_task_bytes)


@pytest.fixture(params=["memory", "dynamodb"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture()
def store(kind: str, request: pytest.FixtureRequest) -> TaskStore:
    return make_store(kind, request)


@pytest.fixture()
def small_store(kind: str, request: pytest.FixtureRequest) -> TaskStore:
    return make_store(kind, request, SMALL_BUDGET)


@pytest.fixture()
def owner() -> Owner:
    return Owner(subject=f"store-{uuid.uuid4()}", agent="echo")


def msg(message_id: str | None = None, text: str = "hi") -> Message:
    return Message(message_id=message_id or f"m-{uuid.uuid4()}", role=Role.USER, parts=[Part(text=text)])


def turn(owner: Owner, context_id: str | None = None, message_id: str | None = None) -> NewTurn:
    return NewTurn(owner=owner, context_id=context_id or f"ctx-{uuid.uuid4()}", message=msg(message_id))


def opened(store: TaskStore, new: NewTurn) -> TaskRecord:
    """create_turn on a context that must be free: the new turn takes it at once."""
    record, took = store.create_turn(new, queue=False)
    assert took, f"{new.context_id} was not free"
    return record


def test_create_turn_opens_a_submitted_task_with_a_derived_id_and_busies_the_context(
    store: TaskStore, owner: Owner
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
    store: TaskStore, owner: Owner
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
    store: TaskStore, owner: Owner
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


def test_a_terminal_status_frees_the_context_for_the_next_turn(store: TaskStore, owner: Owner) -> None:
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


def test_list_pages_return_every_task_once_newest_status_first(store: TaskStore, owner: Owner) -> None:
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


def test_a_tampered_page_token_is_invalid(store: TaskStore, owner: Owner) -> None:
    # Given a real token for the first page of three tasks
    contexts = [f"ctx-{uuid.uuid4()}" for _ in range(3)]
    for context_id in contexts:
        opened(store, turn(owner, context_id))
    token = store.list_tasks(owner, TaskQuery(page_size=1)).next_page_token
    assert token
    raw = codec.unseal(token)
    # Sealed with the Runtime's own key: the checks behind the MAC still refuse what the Runtime never issues.
    encode = codec.seal

    def unsealed(value: object) -> str:  # a token as a caller could make one (unsealed tokens were just this)
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    tampered = {
        "garbage": "not-a-token",
        "truncated": token[: len(token) // 2],
        "made up": unsealed(raw),
        "made up, another MAC": unsealed(raw) + "." + "0" * 32,
        "other MAC": token.split(".")[0] + "." + "0" * 32,
        "other fingerprint": encode({**raw, "f": "0" * 16}),
        "no key": encode({"f": raw["f"]}),
        "empty key": encode({**raw, "k": {}}),
        "number key": encode({**raw, "k": 7}),
    }
    if isinstance(raw["k"], dict):  # the DynamoDB store's key: its parts rewritten
        tampered["non-string key"] = encode({**raw, "k": {**raw["k"], "PK": 7}})
        tampered["partial key"] = encode({**raw, "k": {"PK": raw["k"]["PK"]}})
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
    store: TaskStore, owner: Owner, kind: str
) -> None:
    if kind == "memory":
        pytest.skip("the in-memory token names no partition")
    # Given a real token whose key a caller rewrote to name another subject's partition
    for _ in range(2):
        opened(store, turn(owner))
    token = store.list_tasks(owner, TaskQuery(page_size=1)).next_page_token
    raw = codec.unseal(token)
    raw["k"]["GSI1PK"] = "echo#" + "f" * 32
    bad = codec.seal(raw)  # even sealed by the Runtime's own key
    # When it is presented
    # Then it is an invalid token (a clear -32602 upstream), not a DynamoDB error
    with pytest.raises(InvalidPageToken):
        store.list_tasks(owner, TaskQuery(page_size=1, page_token=bad))


def test_a_page_token_is_bound_to_its_status_timestamp_after(store: TaskStore, owner: Owner) -> None:
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


def test_no_journal_entry_starts_on_a_canceled_task(store: TaskStore, owner: Owner) -> None:
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


def test_a_journal_entry_starts_once(store: TaskStore, owner: Owner) -> None:
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


def test_an_interaction_is_answered_exactly_once(store: TaskStore, owner: Owner) -> None:
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


def working(store: TaskStore, owner: Owner) -> TaskRecord:
    record = opened(store, turn(owner))
    store.set_status(record.task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    return record


def test_a_page_token_is_bound_to_its_subject(store: TaskStore, owner: Owner) -> None:
    # Given a real token of one subject's list
    for _ in range(2):
        opened(store, turn(owner))
    token = store.list_tasks(owner, TaskQuery(page_size=1)).next_page_token
    # When another subject presents it
    # Then it is invalid
    with pytest.raises(InvalidPageToken):
        store.list_tasks(Owner(subject=f"store-{uuid.uuid4()}", agent="echo"), TaskQuery(page_token=token))


def test_values_come_back_as_their_json_round_trip(store: TaskStore, owner: Owner) -> None:
    # Given metadata, an effect result and an answer that JSON changes (tuples, int keys)
    new = NewTurn(owner=owner, context_id=f"ctx-{uuid.uuid4()}", message=msg(), metadata={"pair": (1, 2)})
    record, _ = store.create_turn(new)
    store.set_status(record.task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    store.journal_start(record.task_id, JournalEntry(seq=1, kind="effect", name="charge"))
    store.journal_finish(record.task_id, 1, {1: ("a", "b")})
    store.journal_start(record.task_id, JournalEntry(seq=2, kind="usage", name="u", finished=True, result=(3,)))
    # When they are read back
    stored = store.get(record.task_id)
    journal = store.journal(record.task_id)
    # Then each is its JSON round trip, in both stores
    assert stored is not None and stored.metadata == {"pair": [1, 2]}
    assert record.metadata == {"pair": [1, 2]}
    assert (journal[1].finished, journal[1].result) == (True, {"1": ["a", "b"]})
    assert (journal[2].finished, journal[2].result) == (True, [3])


def test_finishing_a_journal_entry_that_was_never_started_is_not_in_state(store: TaskStore, owner: Owner) -> None:
    record = working(store, owner)
    with pytest.raises(NotInState):
        store.journal_finish(record.task_id, 9, "x")


def test_the_head_is_the_same_plain_task_item_in_both_stores(store: TaskStore, owner: Owner) -> None:
    # Given a working task with a plan-less interaction
    record = working(store, owner)
    # When its head is read
    head = store.head(record.task_id)
    # Then it holds the task item's plain values (ints, not Decimals), keys and counters included
    assert head is not None
    assert {"PK", "SK", "taskId", "contextId", "agent", "subject", "turn", "state", "status", "statusTs",
            "version", "msgSeq", "artSeq", "contentBytes", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK"} <= set(head)
    assert (head["state"], head["version"], head["msgSeq"], head["turn"]) == (TaskState.WORKING.value, 2, 1, 1)
    assert type(head["version"]) is int
    assert store.head(str(uuid.uuid4())) is None


def test_queued_turns_claim_the_context_in_order_passing_over_canceled_ones(store: TaskStore, owner: Owner) -> None:
    # Given a busy context with two queued turns, the first of them canceled
    first = opened(store, turn(owner))
    second, took2 = store.create_turn(turn(owner, first.context_id))
    third, took3 = store.create_turn(turn(owner, first.context_id))
    assert (took2, took3) == (False, False)
    assert store.claim_next(owner, first.context_id) is None  # the context is still held
    store.set_status(second.task_id, TaskStatus(state=TaskState.CANCELED), expect={TaskState.SUBMITTED})
    store.set_status(first.task_id, TaskStatus(state=TaskState.COMPLETED), expect={TaskState.SUBMITTED})
    # When the next turn claims it
    claimed = store.claim_next(owner, first.context_id)
    # Then the third takes it (its version bumped), and nothing more waits
    assert claimed == third.task_id
    assert store.context_state(owner, first.context_id) == {"turns": 3, "started": 3, "activeTask": third.task_id}
    after = store.get(third.task_id)
    assert after is not None and after.version == 2
    assert store.claim_next(owner, first.context_id) is None


def test_size_budget_refuses_history_and_artifacts_past_it(small_store: TaskStore, owner: Owner) -> None:
    store = small_store
    record = working(store, owner)
    big = "x" * (150 * 1024)
    store.put_artifact(record.task_id, Artifact(artifact_id="a", parts=[Part(text=big)]))
    # A second large artifact passes the budget: TooLarge, nothing written
    with pytest.raises(TooLarge):
        store.put_artifact(record.task_id, Artifact(artifact_id="b", parts=[Part(text=big)]))
    # Rewriting the same artifact replaces its share
    store.put_artifact(record.task_id, Artifact(artifact_id="a", parts=[Part(text=big + "y")]))
    reply = Message(message_id="r1", role=Role.AGENT, parts=[Part(text=big)])
    with pytest.raises(TooLarge):
        store.set_status(record.task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.WORKING},
                         history=[reply])
    with pytest.raises(TooLarge):
        store.append_history(record.task_id, [msg(text=big)], None)
    stored = store.get(record.task_id)
    assert stored is not None and [a.artifact_id for a in stored.artifacts] == ["a"]
    assert len(stored.history) == 1
    # Unless the Runtime's own closing message is not held to it
    store.set_status(record.task_id, TaskStatus(state=TaskState.COMPLETED), expect={TaskState.WORKING},
                     history=[reply], enforce_budget=False)


def test_a_caller_message_is_recorded_once(store: TaskStore, owner: Owner) -> None:
    record = working(store, owner)
    store.append_history(record.task_id, [msg(text="note")], None, sender=(owner, "note-1"))
    with pytest.raises(DuplicateMessage) as again:
        store.append_history(record.task_id, [msg(text="note")], None, sender=(owner, "note-1"))
    assert again.value.task_id == record.task_id
    assert store.task_for_message(owner, "note-1") == record.task_id
    stored = store.get(record.task_id)
    assert stored is not None and len(stored.history) == 2
    with pytest.raises(NotInState):
        store.append_history(str(uuid.uuid4()), [msg()], None)


def test_answering_a_closed_or_unknown_interaction(store: TaskStore, owner: Owner) -> None:
    record = working(store, owner)
    status = TaskStatus(state=TaskState.WORKING)
    with pytest.raises(InteractionClosed):
        store.answer_interaction(record.task_id, "q-1", "x", msg(), status, owner, "k-1")
    store.journal_start(record.task_id, JournalEntry(seq=1, kind="interaction", name="q"))
    question = Interaction(interaction_id="q-1", kind="question", prompt="?")
    store.set_status(record.task_id, TaskStatus(state=TaskState.INPUT_REQUIRED), expect={TaskState.WORKING},
                     interaction=question, interaction_seq=1)
    with pytest.raises(InteractionClosed):
        store.answer_interaction(record.task_id, "q-2", "x", msg(), status, owner, "k-1")
    # A reply whose retry key was seen is a duplicate, naming the task it made
    store.append_history(record.task_id, [msg()], None, sender=(owner, "k-seen"))
    with pytest.raises(DuplicateMessage) as dup:
        store.answer_interaction(record.task_id, "q-1", "x", msg(), status, owner, "k-seen")
    assert dup.value.task_id == record.task_id
    store.answer_interaction(record.task_id, "q-1", {"pick": (1,)}, msg(), status, owner, "k-1")
    assert store.journal(record.task_id)[1].answer == {"pick": [1]}


def test_wait_tokens(store: TaskStore, owner: Owner) -> None:
    record = working(store, owner)
    store.put_wait_token(record.task_id, "q-1", "tok-1")
    assert store.get_wait_token(record.task_id, "q-1") == "tok-1"
    assert store.get_wait_token(record.task_id, "q-2") is None
    assert store.wait_tokens(record.task_id) == ["tok-1"]


def push(config_id: str, task_id: str, created: str) -> StoredPushConfig:
    config = TaskPushNotificationConfig(id=config_id, task_id=task_id, url="https://example.com/hook")
    return StoredPushConfig(config=config, created_at=created, extensions=("x",))


def test_push_configs_expire_and_the_sweep_removes_orphans_and_expired(store: TaskStore, owner: Owner) -> None:
    # Given two configs on a live task and one on a task that never existed
    record = working(store, owner)
    gone = f"gone-{uuid.uuid4()}"
    store.put_push_config(record.task_id, push("b", record.task_id, "2024-01-02"))
    store.put_push_config(record.task_id, push("a", record.task_id, "2024-01-01"))
    store.put_push_config(gone, push("c", gone, "2024-01-01"))
    # Then they read back in creation order, extensions and all
    listed = store.list_push_configs(record.task_id)
    assert [c.config.id for c in listed] == ["a", "b"] and listed[0].extensions == ("x",)
    got = store.get_push_config(record.task_id, "a")
    assert got is not None and got.config.url == "https://example.com/hook" and got.expires_at is None
    assert store.get_push_config(record.task_id, "zz") is None
    # When the task's configs expire (one long ago), and one is deleted
    store.expire_push_configs(record.task_id, int(time.time()) + 3600)
    got = store.get_push_config(record.task_id, "a")
    assert got is not None and got.expires_at is not None
    store.delete_push_config(record.task_id, "b")
    store.delete_push_config(record.task_id, "never")  # deleting nothing is fine
    assert [c.config.id for c in store.list_push_configs(record.task_id)] == ["a"]
    # Then the sweep removes the orphan (and, once past expiry, the expired config)
    assert store.sweep_push_configs() >= 1
    assert store.list_push_configs(gone) == []
    assert [c.config.id for c in store.list_push_configs(record.task_id)] == ["a"]
    store.expire_push_configs(record.task_id, int(time.time()) - 1)
    store.sweep_push_configs()
    assert store.list_push_configs(record.task_id) == []


def test_file_versions_count_per_path_and_keep_a_retried_write(store: TaskStore, owner: Owner) -> None:
    scope = f"scope-{uuid.uuid4()}"
    assert store.file_version(scope, "a.txt", "w1") == 1
    assert store.file_version(scope, "a.txt", "w2") == 2
    assert store.file_version(scope, "a.txt", "w1") == 1  # retried
    assert store.file_version(scope, "b.txt", "w3") == 1
    assert store.file_version(f"{scope}-other", "a.txt", "w4") == 1


def test_aws_errors_become_domain_errors(kind: str, request: pytest.FixtureRequest, owner: Owner) -> None:
    if kind == "memory":
        pytest.skip("no AWS below the in-memory store")
    local_runtime: LocalRuntime = request.getfixturevalue("local_runtime")
    assert local_runtime.runtime is not None
    # Given a store on a table that does not exist
    broken = DynamoTaskStore(local_runtime.runtime.client("dynamodb"), "no-such-table")
    # Then every kind of call raises StoreUnavailable, never a botocore ClientError
    calls = [
        lambda: broken.get("t"),
        lambda: broken.head("t"),
        lambda: broken.create_turn(turn(owner)),
        lambda: broken.list_tasks(owner, TaskQuery()),
        lambda: broken.journal_finish("t", 1, None),
        lambda: broken.put_push_config("t", push("a", "t", "x")),
        lambda: broken.sweep_push_configs(),
        lambda: broken.file_version("s", "p", "w"),
    ]
    for call in calls:
        with pytest.raises(StoreUnavailable):
            call()
    assert VersionConflict  # (re-exported with the other conflicts)


def test_a_fan_out_reads_configs_a_page_at_a_time_and_remembers_how_far_it_got(store: TaskStore, owner: Owner) -> None:
    # Given a task with three configs (ids out of creation order)
    record = working(store, owner)
    for config_id, created in (("c", "2024-01-01"), ("a", "2024-01-02"), ("b", "2024-01-03")):
        store.put_push_config(record.task_id, push(config_id, record.task_id, created))
    # When a fan-out reads them two at a time, by id, and notes the last one it queued
    first = store.push_configs_after(record.task_id, None, 2)
    store.set_fan_out_cursor(record.task_id, "e1", str(first[-1].config.id), int(time.time()) + 3600)
    cursor = store.fan_out_cursor(record.task_id, "e1")
    rest = store.push_configs_after(record.task_id, cursor, 2)
    # Then the pages are [a, b] and [c], the cursor reads back, another event has none, and it can be forgotten
    assert [c.config.id for c in first] == ["a", "b"] and [c.config.id for c in rest] == ["c"]
    assert cursor == "b" and store.fan_out_cursor(record.task_id, "e2") is None
    store.set_fan_out_cursor(record.task_id, "e1", None, 0)
    assert store.fan_out_cursor(record.task_id, "e1") is None
    # And expiring only the configs one step queued leaves the others as they were
    store.expire_push_configs(record.task_id, int(time.time()) + 3600, ["a"])
    expires = {c.config.id: c.expires_at for c in store.list_push_configs(record.task_id)}
    assert expires["a"] is not None and expires["b"] is None and expires["c"] is None



def test_expiring_a_step_s_configs_when_one_was_deleted_meanwhile_expires_the_rest_and_keeps_it_deleted(
    store: TaskStore, owner: Owner
) -> None:
    # Given a task with three configs, of which one is deleted after a fan-out step read them
    record = working(store, owner)
    for config_id in ("a", "b", "c"):
        store.put_push_config(record.task_id, push(config_id, record.task_id, "2024-01-01"))
    store.delete_push_config(record.task_id, "b")
    # When the step expires the three it queued
    store.expire_push_configs(record.task_id, int(time.time()) + 3600, ["a", "b", "c"])
    # Then the other two expire, and the deleted one is not made again (DynamoDB: the transaction of the three is
    # canceled, and each is expired on its own condition)
    expires = {c.config.id: c.expires_at for c in store.list_push_configs(record.task_id)}
    assert set(expires) == {"a", "c"} and None not in expires.values()
    assert store.get_push_config(record.task_id, "b") is None


# ---------------------------------------------------------------- quotas (nylorun.domain.quotas)
QUOTAS = Quotas(turns_per_context=2, turns_per_subject=3, push_configs_per_task=2, push_configs_per_subject=3)


@pytest.fixture()
def quota_store(kind: str, request: pytest.FixtureRequest) -> TaskStore:
    if kind == "memory":
        return InMemoryTaskStore(quotas=QUOTAS)
    local_runtime: LocalRuntime = request.getfixturevalue("local_runtime")
    client = local_runtime.runtime.client("dynamodb") if local_runtime.runtime else None
    return DynamoTaskStore(client, local_runtime.stack.table_name, quotas=QUOTAS)


def refused(call: Callable[[], object], quota: str) -> None:
    with pytest.raises(QuotaExceeded) as over:
        call()
    assert (over.value.quota, over.value.limit) == (quota, QUOTAS.limit(over.value.quota))


def test_open_turns_are_capped_per_context_and_per_subject_and_released_when_a_task_ends(
    quota_store: TaskStore, owner: Owner
) -> None:
    store = quota_store
    # Given a context holding its 2 open turns (one running, one queued)
    first = opened(store, turn(owner))
    queued, _ = store.create_turn(turn(owner, first.context_id))
    before = store.context_state(owner, first.context_id)
    # When a third turn comes to that context
    third = turn(owner, first.context_id)
    # Then it is refused, naming the quota, and nothing is written (no task, no dedupe record, same counters)
    refused(lambda: store.create_turn(third), "turnsPerContext")
    assert store.context_state(owner, first.context_id) == before
    assert store.get(derive_task_id(owner, first.context_id, 3)) is None
    assert store.task_for_message(owner, third.dedupe_key) is None
    # And the subject's third open turn (another context, another Agent) fills the subject's quota
    other_agent = Owner(subject=owner.subject, agent="support")
    opened(store, turn(other_agent))
    refused(lambda: store.create_turn(turn(owner)), "turnsPerSubject")
    # When the queued turn is canceled and the first ends
    store.set_status(queued.task_id, TaskStatus(state=TaskState.CANCELED), expect={TaskState.SUBMITTED})
    store.set_status(first.task_id, TaskStatus(state=TaskState.COMPLETED), expect={TaskState.SUBMITTED})
    # Then both counts have room again: the context takes two more, the subject has one left after that
    store.create_turn(turn(owner, first.context_id))
    store.create_turn(turn(owner, first.context_id))
    refused(lambda: store.create_turn(turn(owner)), "turnsPerSubject")
    # And another subject is not affected
    opened(store, turn(Owner(subject=f"{owner.subject}-other", agent="echo")))


def test_push_configs_are_capped_per_task_and_per_subject_of_open_tasks(quota_store: TaskStore, owner: Owner) -> None:
    store = quota_store
    # Given a task with its 2 configs
    one, two = opened(store, turn(owner)), opened(store, turn(owner))
    store.put_push_config(one.task_id, push("a", one.task_id, "2024-01-01"))
    store.put_push_config(one.task_id, push("b", one.task_id, "2024-01-02"))
    # When a third is added to it: refused, nothing written; replacing one (same id) still works
    refused(lambda: store.put_push_config(one.task_id, push("c", one.task_id, "2024-01-03")), "pushConfigsPerTask")
    store.put_push_config(one.task_id, push("b", one.task_id, "2024-01-04"))
    assert [c.config.id for c in store.list_push_configs(one.task_id)] == ["a", "b"]
    # And the subject's third config (on another task) fills the subject's quota: a fourth anywhere is refused
    store.put_push_config(two.task_id, push("x", two.task_id, "2024-01-01"))
    refused(lambda: store.put_push_config(two.task_id, push("y", two.task_id, "2024-01-02")), "pushConfigsPerSubject")
    assert [c.config.id for c in store.list_push_configs(two.task_id)] == ["x"]
    # When one is deleted (twice: idempotent), there is room for one more
    store.delete_push_config(one.task_id, "a")
    store.delete_push_config(one.task_id, "a")
    store.put_push_config(two.task_id, push("y", two.task_id, "2024-01-02"))
    refused(lambda: store.put_push_config(one.task_id, push("c", one.task_id, "2024-01-03")), "pushConfigsPerSubject")
    # When a task ends, its configs leave the subject's count (an ended task sends nothing)
    store.set_status(two.task_id, TaskStatus(state=TaskState.COMPLETED), expect={TaskState.SUBMITTED})
    store.put_push_config(one.task_id, push("c", one.task_id, "2024-01-05"))
    # And an ended task still holds at most its own cap
    refused(lambda: store.put_push_config(two.task_id, push("z", two.task_id, "2024-01-04")), "pushConfigsPerTask")
    assert [c.config.id for c in store.list_push_configs(two.task_id)] == ["x", "y"]


def test_a_sendmessage_config_is_written_with_its_turn_or_not_at_all(quota_store: TaskStore, owner: Owner) -> None:
    store = quota_store
    # Given a subject with 3 configs on one task and two others open (its push quota reached, one turn left)
    full = opened(store, turn(owner))
    for config_id in ("a", "b"):
        store.put_push_config(full.task_id, push(config_id, full.task_id, "2024-01-01"))
    other = opened(store, turn(owner))
    store.put_push_config(other.task_id, push("c", other.task_id, "2024-01-01"))
    # When a new turn comes with a config of its own
    config = push("inline", "", "2024-01-02")
    new = dataclasses.replace(turn(owner), push_config=config)
    # Then the turn is refused with the config, nothing of either written
    refused(lambda: store.create_turn(new), "pushConfigsPerSubject")
    assert store.context_state(owner, new.context_id) == {"turns": 0, "started": 0, "activeTask": None}
    # When a config is deleted, the same turn is created with its config, which carries the new task's id
    store.delete_push_config(other.task_id, "c")
    record, _ = store.create_turn(new)
    [stored] = store.list_push_configs(record.task_id)
    assert (stored.config.id, stored.config.task_id) == ("inline", record.task_id)


@pytest.mark.parametrize("what", ["turns in one context", "turns of one subject", "configs"])
def test_racing_callers_never_pass_a_quota(quota_store: TaskStore, owner: Owner, what: str) -> None:
    store = quota_store
    # Given a fresh context, a fresh subject, or a fresh task
    target = opened(store, turn(owner)) if what == "configs" else None
    context_id = f"ctx-{uuid.uuid4()}"

    def attempt(index: int) -> bool:
        try:
            if what == "turns of one subject":
                store.create_turn(turn(owner))  # each in a context of its own
            elif target is None:
                store.create_turn(turn(owner, context_id))
            else:
                store.put_push_config(target.task_id, push(f"c{index}", target.task_id, "2024-01-01"))
            return True
        except QuotaExceeded:
            return False

    # When 12 callers race
    with ThreadPoolExecutor(max_workers=12) as pool:
        accepted = sum(pool.map(attempt, range(12)))
    # Then exactly the quota's worth were accepted, and that is what the store holds
    if what == "turns of one subject":
        assert accepted == QUOTAS.turns_per_subject
        assert store.list_tasks(owner, TaskQuery()).total_size == QUOTAS.turns_per_subject
    elif target is None:
        assert accepted == QUOTAS.turns_per_context
        assert store.context_state(owner, context_id)["turns"] == QUOTAS.turns_per_context
    else:
        assert accepted == QUOTAS.push_configs_per_task
        assert len(store.list_push_configs(target.task_id)) == QUOTAS.push_configs_per_task


# ---------------------------------------------------------------- operators (docs/operate.md)
def lost_effect(store: TaskStore, owner: Owner) -> tuple[TaskRecord, Uncertainty]:
    """A working task whose effect at journal #1 started and never finished, marked uncertain (as the runner does)."""
    record = working(store, owner)
    store.journal_start(record.task_id, JournalEntry(seq=1, kind="effect", name="charge"))
    lost = Uncertainty(effect_id=f"eff-{uuid.uuid4().hex[:16]}", seq=1, attempt=0)
    store.set_status(record.task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.WORKING}, uncertain=lost)
    return record, lost


def test_an_uncertain_task_is_listed_until_its_next_status_write(store: TaskStore, owner: Owner) -> None:
    # Given a task marked uncertain
    record, lost = lost_effect(store, owner)
    operators: OperatorStore = store  # type: ignore[assignment]  # both stores keep the operators' part too
    # Then it is listed (every subject's list), its record carries the mark, its journal entry its start time
    (listed,) = [u for u in operators.uncertain_tasks() if u.task_id == record.task_id]
    assert (listed.uncertainty, listed.owner, listed.context_id) == (lost, owner, record.context_id)
    assert store.get(record.task_id).uncertainty == lost  # type: ignore[union-attr]
    assert store.journal(record.task_id)[1].started_at is not None
    assert store.journal(record.task_id)[1].finished_at is None
    # When any later status is written (here: a cancel)
    store.set_status(record.task_id, TaskStatus(state=TaskState.CANCELED), expect={TaskState.WORKING})
    # Then it is no longer listed nor marked
    assert all(u.task_id != record.task_id for u in operators.uncertain_tasks())
    assert store.get(record.task_id).uncertainty is None  # type: ignore[union-attr]


def test_a_status_write_expecting_another_attempt_is_not_in_state(store: TaskStore, owner: Owner) -> None:
    record, lost = lost_effect(store, owner)
    with pytest.raises(NotInState):
        store.set_status(record.task_id, TaskStatus(state=TaskState.FAILED), expect={TaskState.WORKING},
                         expect_uncertain=lost.attempt + 1)
    store.set_status(record.task_id, TaskStatus(state=TaskState.FAILED), expect={TaskState.WORKING},
                     expect_uncertain=lost.attempt)
    assert store.get(record.task_id).state == TaskState.FAILED  # type: ignore[union-attr]


@pytest.mark.parametrize("done", [True, False], ids=["finished", "not-done"])
def test_a_resolution_is_written_once_and_moves_the_attempt_on(store: TaskStore, owner: Owner, done: bool) -> None:
    record, lost = lost_effect(store, owner)
    operators: OperatorStore = store  # type: ignore[assignment]
    resolution = Resolution(effect_id=lost.effect_id, done=done, result={"receipt": "R-1"} if done else None)
    # When an operator resolves it
    attempt = operators.resolve_uncertain(record.task_id, lost, resolution, TaskStatus(state=TaskState.WORKING))
    # Then the attempt moved on, the mark is gone, and the journal says what the operator found
    after = store.get(record.task_id)
    assert after is not None and (attempt, after.attempt, after.uncertainty) == (1, 1, None)
    journal = store.journal(record.task_id)
    if done:
        assert (journal[1].finished, journal[1].result) == (True, {"receipt": "R-1"})
        assert journal[1].finished_at is not None
    else:
        assert 1 not in journal  # the effect starts again at #1, so with the same key
    assert operators.last_resolution(record.task_id) == Resolved(lost.effect_id, done, resolution.digest, 1)
    # And the same resolution again is refused by the store: nothing is written twice
    with pytest.raises(NotInState):
        operators.resolve_uncertain(record.task_id, lost, resolution, TaskStatus(state=TaskState.WORKING))
    assert store.get(record.task_id).version == after.version  # type: ignore[union-attr]
