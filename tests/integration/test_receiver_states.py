"""The push receivers' shared state in the task table (adapters/dynamodb/receivers.py), as every push instance sees
it: a subject's delivery slots are leases no two holders share, the breaker counts and parks, and no item key names
a subject or a URL. On moto, beside the in-memory store that keeps the same contract."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.ports import TaskStore
from nylorun.service.fairness import receiver_key, slots_key
from nylorun_local.runtime import LocalRuntime

T0 = 1_800_000_000.0


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> TaskStore:
    if request.param == "memory":
        return InMemoryTaskStore()
    local_runtime: LocalRuntime = request.getfixturevalue("local_runtime")
    assert local_runtime.runtime is not None
    return local_runtime.runtime.store


def test_a_subjects_slots_are_held_by_one_holder_each_until_freed_or_run_out(store: TaskStore) -> None:
    # Given a subject with two delivery slots
    owner = slots_key(f"alice-{uuid.uuid4()}")
    # When three instances ask for one at once ("a" for 10 s, the others for 100 s)
    taken = [store.take_delivery_slot(owner, 2, h, T0, T0 + (10 if h == "a" else 100)) for h in ("a", "b", "c")]
    # Then two get one each and the third none
    assert sorted(s for s in taken if s is not None) == [0, 1] and taken[2] is None
    # And a holder whose lease was taken over frees nothing of the new holder's
    assert store.take_delivery_slot(owner, 2, "d", T0 + 11, T0 + 20) == 0  # "a" ran out (died): "d" takes it
    store.free_delivery_slot(owner, 0, "a")
    assert store.take_delivery_slot(owner, 2, "e", T0 + 12, T0 + 20) is None
    # And a freed slot is free again at once
    store.free_delivery_slot(owner, 1, "b")
    assert store.take_delivery_slot(owner, 2, "e", T0 + 12, T0 + 20) == 1


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
    # Given a subject's receiver that failed and was parked, and one of its slots held
    assert local_runtime.runtime is not None and local_runtime.stack is not None
    store, subject = local_runtime.runtime.store, f"alice-{uuid.uuid4()}@example.com"
    receiver = receiver_key(subject, "https://hooks.example.com/alice")
    store.receiver_failed(receiver, int(T0) + 3600)
    store.open_receiver(receiver, T0 + 60, int(T0) + 3600)
    store.take_delivery_slot(slots_key(subject), 2, "a", T0, T0 + 10)
    # When the table's items are read
    dynamodb = local_runtime.runtime.client("dynamodb")
    items: list[dict[str, Any]] = dynamodb.scan(TableName=local_runtime.stack.table_name)["Items"]
    ours = [i for i in items if i["PK"]["S"] in (f"RCV#{receiver}", f"RCV#{slots_key(subject)}")]
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
