"""The push receivers' shared state in the task table (adapters/dynamodb/receivers.py), as every push instance sees
it: a subject's delivery budget is reserved atomically and never past its bound, the breaker counts and parks, and no
item key names a subject or a URL. On moto, beside the in-memory store that keeps the same contract."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.ports import TaskStore
from nylorun.service.fairness import budget_key, receiver_key
from nylorun_local.runtime import LocalRuntime

T0 = 1_800_000_000.0


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> TaskStore:
    if request.param == "memory":
        return InMemoryTaskStore()
    local_runtime: LocalRuntime = request.getfixturevalue("local_runtime")
    assert local_runtime.runtime is not None
    return local_runtime.runtime.store


def test_a_subjects_budget_is_reserved_up_to_its_bound_refunded_and_kept_per_window(store: TaskStore) -> None:
    # Given a subject's budget of 12 s in a window
    owner, expires = budget_key(f"alice-{uuid.uuid4()}"), int(T0) + 3600
    # When three attempts reserve 5 s each
    taken = [store.reserve_budget(owner, 7, 5, 12, expires) for _ in range(3)]
    # Then two get it and the third does not (10 + 5 > 12), and nothing of it was reserved
    assert taken == [True, True, False]
    assert store.reserve_budget(owner, 7, 2, 12, expires) is True  # 10 + 2 fits exactly
    # And what an attempt did not hold comes back at once (the first answered after 0.25 s)
    store.refund_budget(owner, 7, 4.75, expires)
    assert store.reserve_budget(owner, 7, 4.75, 12, expires) is True
    assert store.reserve_budget(owner, 7, 0.001, 12, expires) is False
    # And the next window starts from nothing; another subject's budget is its own
    assert store.reserve_budget(owner, 8, 12, 12, expires) is True
    assert store.reserve_budget(budget_key(f"bob-{uuid.uuid4()}"), 7, 12, 12, expires) is True
    # And an attempt longer than the whole budget is never let through
    assert store.reserve_budget(budget_key(f"carol-{uuid.uuid4()}"), 7, 13, 12, expires) is False


def test_the_breaker_counts_failures_parks_allows_one_probe_and_closes_on_an_answer(store: TaskStore) -> None:
    receiver = receiver_key(f"alice-{uuid.uuid4()}", "https://down.example/hook")
    assert store.receiver_state(receiver) is None
    assert [store.receiver_failed(receiver, int(T0) + 3600) for _ in range(3)] == [1, 2, 3]
    store.open_receiver(receiver, T0 + 60, int(T0) + 3600)
    store.open_receiver(receiver, T0 + 30, int(T0) + 3600)  # a racing instance's earlier end does not shorten it
    state = store.receiver_state(receiver)
    assert state is not None and state.failures == 3 and state.open_until == T0 + 60
    # one probe at a time once the period is over
    assert store.claim_probe(receiver, T0 + 61, T0 + 70) is True
    assert store.claim_probe(receiver, T0 + 62, T0 + 70) is False
    store.receiver_answered(receiver)
    assert store.receiver_state(receiver) is None


def test_receiver_items_name_no_subject_or_url_and_expire(local_runtime: LocalRuntime) -> None:
    # Given a subject's receiver that failed and was parked, and some of its budget reserved
    assert local_runtime.runtime is not None and local_runtime.stack is not None
    store, subject = local_runtime.runtime.store, f"alice-{uuid.uuid4()}@example.com"
    receiver = receiver_key(subject, "https://hooks.example.com/alice")
    store.receiver_failed(receiver, int(T0) + 3600)
    store.open_receiver(receiver, T0 + 60, int(T0) + 3600)
    store.reserve_budget(budget_key(subject), 3, 5, 60, int(T0) + 3600)
    # When the table's items are read
    dynamodb = local_runtime.runtime.client("dynamodb")
    items: list[dict[str, Any]] = dynamodb.scan(TableName=local_runtime.stack.table_name)["Items"]
    ours = [i for i in items if i["PK"]["S"] in (f"RCV#{receiver}", f"RCV#{budget_key(subject)}")]
    # Then both are there, every one with the table's TTL attribute, and none names the subject or the receiver's host
    assert len(ours) == 2 and all("expiresAt" in i for i in ours)
    assert not any(word in str(i) for i in ours for word in ("alice", "example.com", "hooks"))


def test_a_deliverys_failed_attempts_are_journaled_one_by_one(store: TaskStore) -> None:
    # Given a delivery never attempted (its webhook-id as the push service keys it)
    delivery = f"msg_{uuid.uuid4().hex}"
    assert store.failed_attempts(delivery) == 0
    # When two of its attempts fail
    counts = [store.attempt_failed(delivery, int(T0) + 3600) for _ in range(2)]
    # Then the journal says so, and another delivery's is its own
    assert counts == [1, 2] and store.failed_attempts(delivery) == 2
    assert store.failed_attempts(f"msg_{uuid.uuid4().hex}") == 0
