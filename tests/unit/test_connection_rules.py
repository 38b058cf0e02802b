"""Connections in the unit tier (docs/writing/connections.md): the refresh race, an undeclared provider, what
a core-tier caller reads, and revoke; on the in-memory stores and a fake provider."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from nylorun.adapters.memory.connections import InMemoryConnectionStore
from nylorun.domain.connections import ConnectionKey, StoredConnection
from nylorun.engine.connections import Connection, ConnectionDeps, UnknownConnection, check_declared
from nylorun.engine.turn import Turn
from nylorun.protocol.models import TaskState
from unit_support import CORE, PAYMENTS, FakeOAuth, agent_of, connect, runtime, state, status_text

KEY = ConnectionKey("alice", "unit", "payments")


class SlowRefresh(FakeOAuth):
    """A provider whose refresh waits until both turns are inside it: the two refreshes race."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = threading.Barrier(2, timeout=5)

    def refresh(self, provider: Any, refresh_token: str) -> dict[str, Any]:
        self.inside.wait()
        return super().refresh(provider, refresh_token)


def test_two_turns_refreshing_at_once_end_with_one_token() -> None:
    # Given a stored connection whose access token has expired
    store, oauth = InMemoryConnectionStore(), SlowRefresh()
    deps = ConnectionDeps(store, oauth, {"payments": PAYMENTS}, None, "https://rt.test")
    expired = {"access_token": "old", "refresh_token": "rt", "expires_at": 1}
    store.put_connection(StoredConnection(KEY, [], deps.seal(KEY, expired), used_at=2**31), expect_version=None)
    # When two turns use it at the same moment
    seen: list[str] = []
    threads = [threading.Thread(target=lambda: seen.append(Connection(deps, KEY).access_token())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then both refreshed, one write won, and both turns use the token that is stored
    stored = store.get_connection(KEY)
    assert stored is not None and stored.version == 2  # the first write and one refresh, not two
    current = deps.open(stored)["access_token"]
    assert seen == [current, current] and current != "old"


def test_an_undeclared_provider_is_an_error_at_load_time_and_in_the_turn() -> None:
    # Given an Agent that declares a provider the stack does not
    def run(turn: Turn) -> None:
        turn.connection("bank", prompt="Connect your bank")

    agent = agent_of(run)
    agent.connections = ["bank"]
    # Then loading it fails, naming it
    with pytest.raises(UnknownConnection, match="'bank'"):
        check_declared([agent], {"payments": PAYMENTS})
    # And a turn that asks anyway fails without asking the person anything
    agent.connections = []
    task = runtime(agent).send("hi")
    assert state(task) == TaskState.FAILED and status_text(task) == "The agent could not complete this turn."


def test_a_core_tier_caller_reads_the_prompt_and_the_url() -> None:
    def run(turn: Turn) -> None:
        turn.reply("paid" if turn.connection("payments", prompt="Connect payments.") else "not paid")

    rt = runtime(agent_of(run))
    task = rt.send("pay", caller=CORE)
    assert state(task) == TaskState.AUTH_REQUIRED
    assert "Connect payments." in status_text(task) and "https://rt.test/v1/a2a/connections/start?" in status_text(task)
    # When the person connects, the turn resumes by itself; revoked, the next turn asks again
    connect(rt, task)
    assert status_text(rt.send("pay again")) == "paid"
    assert rt.connections.revoke("alice", "unit", "payments") is True
    assert state(rt.send("pay once more")) == TaskState.AUTH_REQUIRED
