"""Busy contexts (Profile v2): a new message in a busy context is queued and answered with the task that will
take it; `delivery: "reject"` gets CONTEXT_BUSY instead. One turn at a time per context, in arrival order,
none lost, none twice, and other contexts never held up."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest
from a2a.utils.errors import UnsupportedOperationError
from conftest import ALICE, auth, rpc, user_message
from nylorun.engine import Agent, Skill, Turn
from nylorun.ports import Owner, TaskStatus
from nylorun.protocol.models import TaskState
from nylorun_local.runtime import LocalRuntime

SKILL = [Skill(id="t", name="t", description="test", tags=["test"])]


class Ledger:
    """What the serial agent saw: who ran, in which order, and whether two turns of a context overlapped."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: dict[str, int] = {}
        self.max_active: dict[str, int] = {}
        self.order: dict[str, list[str]] = {}
        self.runs: dict[str, int] = {}

    def enter(self, context_id: str, task_id: str) -> None:
        with self.lock:
            self.active[context_id] = self.active.get(context_id, 0) + 1
            self.max_active[context_id] = max(self.max_active.get(context_id, 0), self.active[context_id])
            self.order.setdefault(context_id, []).append(task_id)
            self.runs[task_id] = self.runs.get(task_id, 0) + 1

    def leave(self, context_id: str) -> None:
        with self.lock:
            self.active[context_id] -= 1


@pytest.fixture(scope="module")
def serial(local_runtime: LocalRuntime) -> dict[str, Any]:
    ledger = Ledger()
    hold = threading.Event()
    hold.set()

    agent = Agent(name="t-serial", description="records its turns", skills=SKILL)

    @agent.turn
    def run(turn: Turn) -> None:
        def work(key: str) -> str:
            ledger.enter(turn.context_id, turn.task_id)
            try:
                hold.wait(20)  # a test can keep a turn running
                time.sleep(0.01)
            finally:
                ledger.leave(turn.context_id)
            return "ok"

        turn.effect("work", work)
        turn.reply(turn.text)

    waiting = Agent(name="t-waits", description="waits for approval", skills=SKILL)

    @waiting.turn
    def wait_run(turn: Turn) -> None:
        if turn.text.startswith("ask"):
            turn.approval("ok?")
        turn.effect("work", lambda key: ledger.runs.__setitem__(turn.task_id, ledger.runs.get(turn.task_id, 0) + 1))
        turn.reply(turn.text)

    local_runtime.add_agent(agent)
    local_runtime.add_agent(waiting)
    return {"ledger": ledger, "hold": hold}


def send(url: str, text: str, context_id: str, *, immediately: bool = True, **meta: Any) -> dict[str, Any]:
    message = user_message(text, contextId=context_id, **({"metadata": meta} if meta else {}))
    return rpc(url, "SendMessage", {"message": message, "configuration": {"returnImmediately": immediately}})


def wait_all(url: str, task_ids: list[str], timeout: float = 120) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    final: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline and len(final) < len(task_ids):
        for task_id in task_ids:
            if task_id not in final:
                task = rpc(url, "GetTask", {"id": task_id, "historyLength": 0})["result"]
                if task["status"]["state"] not in ("TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED"):
                    # All must end, so the rest can be read once this one has: reading all 50 on every round
                    # took the CPU the queued turns need.
                    break
                final[task_id] = task
        time.sleep(0.1)
    return final


def turn_of(local_runtime: LocalRuntime, task_id: str) -> int:
    head = local_runtime.runtime.store.head(task_id)
    assert head is not None
    return int(head["turn"])


def test_three_quick_messages_queue_and_run_in_order(local_runtime: LocalRuntime, serial: dict[str, Any]) -> None:
    url, ledger, context = local_runtime.agent_url("t-serial"), serial["ledger"], str(uuid.uuid4())
    serial["hold"].clear()
    # Given three messages sent quickly to one context while its first turn is still running
    answers = [send(url, f"message {i}", context)["result"]["task"] for i in range(3)]
    # Then each got its own task at once, the later ones SUBMITTED (queued)
    ids = [a["id"] for a in answers]
    assert len(set(ids)) == 3
    assert all(a["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING") for a in answers)
    assert answers[1]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert answers[2]["status"]["state"] == "TASK_STATE_SUBMITTED"
    # And each queued task's status message says which task it waits for: the one ahead of it
    for queued, ahead in ((answers[1], ids[0]), (answers[2], ids[1])):
        words = queued["status"]["message"]["parts"][0]["text"]
        assert ahead in words and "Queued" in words, queued["status"]
    # When the running turn is let go
    serial["hold"].set()
    final = wait_all(url, ids)
    # Then all complete, one after another, in the order they arrived
    assert [final[i]["status"]["state"] for i in ids] == ["TASK_STATE_COMPLETED"] * 3
    assert ledger.order[context] == ids
    assert ledger.max_active[context] == 1
    listed = rpc(url, "ListTasks", {"contextId": context})["result"]
    assert sorted(t["id"] for t in listed["tasks"]) == sorted(ids) and listed["totalSize"] == 3


def test_delivery_reject_on_a_busy_context_is_context_busy(local_runtime: LocalRuntime, serial: dict[str, Any], table_items) -> None:
    url, context = local_runtime.agent_url("t-waits"), str(uuid.uuid4())
    # Given a context busy with a turn waiting for an approval
    first = send(url, "ask first", context, immediately=False)["result"]["task"]
    assert first["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    # The answer can come before the turn's wait token (JRN#…, WAIT#…) is written: the snapshot waits for it.
    deadline = time.monotonic() + 20
    while not any(i["PK"]["S"] == f"JRN#{first['id']}" and i["SK"]["S"].startswith("WAIT#") for i in table_items()):
        assert time.monotonic() < deadline, "the turn never wrote its wait token"
        time.sleep(0.05)
    before = table_items()

    async def body() -> None:
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=60)
        client = await create_client(url, client_config=ClientConfig(streaming=False, httpx_client=http))
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="now!")], context_id=context)
        message.metadata.update({"delivery": "reject"})
        request = SendMessageRequest(message=message, configuration=SendMessageConfiguration(return_immediately=True))
        # When a message with delivery "reject" arrives
        with pytest.raises(UnsupportedOperationError) as caught:
            async for _ in client.send_message(request, context=ClientCallContext()):
                pass
        # Then the a2a-sdk client raises UnsupportedOperationError whose data says CONTEXT_BUSY
        assert caught.value.data["reason"] == "CONTEXT_BUSY"
        assert caught.value.data["contextId"] == context
        assert caught.value.data["taskId"] == first["id"]
        await client.close()
        await http.aclose()

    asyncio.run(body())
    # And nothing was queued or written
    assert table_items() == before
    assert local_runtime.runtime.store.context_state(Owner("alice", "t-waits"), context)["turns"] == 1


def test_a_queued_task_canceled_never_runs_and_the_queue_moves_on(local_runtime: LocalRuntime, serial: dict[str, Any]) -> None:
    url, ledger, context = local_runtime.agent_url("t-waits"), serial["ledger"], str(uuid.uuid4())
    # Given an active turn waiting for approval and two queued behind it
    first = send(url, "ask", context, immediately=False)["result"]["task"]
    second = send(url, "second", context)["result"]["task"]
    third = send(url, "third", context)["result"]["task"]
    assert second["status"]["state"] == third["status"]["state"] == "TASK_STATE_SUBMITTED"
    # When the queued second is canceled, then the first
    canceled = rpc(url, "CancelTask", {"id": second["id"]})["result"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert rpc(url, "CancelTask", {"id": first["id"]})["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    # Then the third runs and completes; the second never ran
    final = wait_all(url, [third["id"]], timeout=30)
    assert final[third["id"]]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert second["id"] not in ledger.runs


def test_the_queue_backstop_starts_a_turn_when_the_fast_path_was_lost(local_runtime: LocalRuntime, serial: dict[str, Any]) -> None:
    url, context = local_runtime.agent_url("t-waits"), str(uuid.uuid4())
    store = local_runtime.runtime.store
    # Given a turn waiting for approval and one queued behind it
    first = send(url, "ask", context, immediately=False)["result"]["task"]
    queued = send(url, "after", context)["result"]["task"]
    # When the first ends but the process dies before starting the next (terminal write only)
    store.set_status(first["id"], TaskStatus(state=TaskState.CANCELED), expect={TaskState.AUTH_REQUIRED})
    # Then the dispatch function, draining the FIFO queue, starts the queued turn
    final = wait_all(url, [queued["id"]], timeout=30)
    assert final[queued["id"]]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_fifty_concurrent_messages_run_one_at_a_time_in_arrival_order(local_runtime: LocalRuntime, serial: dict[str, Any]) -> None:
    url, ledger = local_runtime.agent_url("t-serial"), serial["ledger"]
    busy, other = str(uuid.uuid4()), str(uuid.uuid4())
    serial["hold"].set()
    # When 50 SendMessage arrive at once in one context
    with ThreadPoolExecutor(max_workers=25) as pool:
        answers = list(pool.map(lambda i: send(url, f"n{i}", busy), range(50)))
    assert [a.get("error") for a in answers] == [None] * 50
    tasks = [a["result"]["task"] for a in answers]
    ids = [t["id"] for t in tasks]
    # And meanwhile one message in another context
    other_task = send(url, "other", other, immediately=False)["result"]["task"]
    # Then the other context was not held up: it finished while the busy one still had turns waiting
    assert other_task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(ledger.order.get(busy, [])) < 50
    # And all 50 ran, exactly once each, one at a time, in the order their turns were numbered (arrival)
    final = wait_all(url, ids, timeout=240)
    assert len(final) == 50 and len(set(ids)) == 50
    assert all(t["status"]["state"] == "TASK_STATE_COMPLETED" for t in final.values())
    assert ledger.max_active[busy] == 1
    assert all(ledger.runs[i] == 1 for i in ids)
    ran = ledger.order[busy]
    assert sorted(ran) == sorted(ids)
    assert [turn_of(local_runtime, t) for t in ran] == list(range(1, 51))
    listed = rpc(url, "ListTasks", {"contextId": busy, "pageSize": 100}, headers=auth())["result"]
    assert listed["totalSize"] == 50
