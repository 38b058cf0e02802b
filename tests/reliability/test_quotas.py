"""Per-subject quotas (docs/security.md, "Quotas"): each attack, as a caller makes it, against the local Runtime's api.

Each attack runs twice: against an api whose quotas are unlimited (`before`: what the Runtime did before it had
quotas; the attack goes through) and against one with the default quotas (`after`: refused). A refusal is the
JSON-RPC error that names the quota and its limit, and changes nothing in the table.

The session's Runtime raises its quotas far above the defaults (tests/conftest.py), so these tests build their
own api over the same stack (same table, state machine and turn function), with a fresh subject each.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nylorun.adapters.dynamodb import layout
from nylorun.domain.ids import Owner
from nylorun.domain.quotas import Quotas
from nylorun.engine import Turn
from nylorun.wiring import Runtime
from nylorun_local.runtime import LocalRuntime
from reliability_kit import Receiver, TableScan, make_agent, settled, snapshot, user_message

pytestmark = pytest.mark.e2e

BUSY, ASKS = "q-busy", "q-asks"
DEFAULTS = Quotas()
UNLIMITED = Quotas(10**6, 10**6, 10**6, 10**6)
PROFILE = "docs.nylorun.com"


@dataclass
class Caller:
    """An api over the session's stack with the given quotas, and a subject of its own."""

    client: TestClient
    token: str
    subject: str
    hook: str  # a receiver that answers 204, so configs of tasks that change deliver rather than retry

    def call(self, agent: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {self.token}"}
        response = self.client.post(f"/v1/a2a/agents/{agent}", json=body, headers=headers)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def send(self, agent: str, text: str, context_id: str, **configuration: Any) -> dict[str, Any]:
        params = {"message": user_message(text, contextId=context_id),
                  "configuration": {"returnImmediately": True, **configuration}}
        return self.call(agent, "SendMessage", params)


@pytest.fixture(scope="module")
def gate(local_runtime: LocalRuntime) -> Iterator[threading.Event]:
    """`q-busy` holds its context until released; `q-asks` waits for a person (an open turn costing nothing)."""
    release = threading.Event()

    def busy(turn: Turn) -> None:
        release.wait(60)
        turn.reply("done")

    def asks(turn: Turn) -> None:
        turn.reply(f"you said {turn.question('Anything else?')}")

    local_runtime.add_agent(make_agent(BUSY, busy))
    local_runtime.add_agent(make_agent(ASKS, asks))
    yield release
    release.set()


@pytest.fixture(scope="module")
def hook(local_runtime: LocalRuntime) -> Iterator[Receiver]:
    receiver = Receiver(str(local_runtime.options.push_secret))
    yield receiver
    receiver.close()


def quiet(hook: Receiver, table_items: TableScan, still: float = 1.5, most: float = 60) -> None:
    """Until what a test set off (turns ending, their deliveries) has settled, so it does not run on beside the
    next test (whose metrics or table checks would see it)."""
    deadline, last, since = time.monotonic() + most, None, time.monotonic()
    while time.monotonic() < deadline:
        now = (snapshot(table_items, (BUSY, ASKS)), len(hook.requests))
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= still:
            return
        time.sleep(0.1)


@pytest.fixture()
def caller(
    local_runtime: LocalRuntime, gate: threading.Event, hook: Receiver, table_items: TableScan
) -> Iterator[Callable[[Quotas], Caller]]:
    clients: list[TestClient] = []

    def make(quotas: Quotas) -> Caller:
        running = local_runtime.runtime
        assert running is not None
        token, subject = f"tok-{uuid.uuid4()}", f"quota-{uuid.uuid4()}"
        settings = running.settings.model_copy(
            update={
                "dev_tokens": {token: subject},
                "max_turns_per_context": quotas.turns_per_context,
                "max_turns_per_subject": quotas.turns_per_subject,
                "max_push_configs_per_task": quotas.push_configs_per_task,
                "max_push_configs_per_subject": quotas.push_configs_per_subject,
            }
        )
        client = TestClient(Runtime(settings=settings, registry=running.registry).app())
        clients.append(client)
        return Caller(client, token, subject, hook.url)

    yield make
    gate.set()  # the busy turns end, and free their contexts for the next test
    quiet(hook, table_items)
    gate.clear()
    for client in clients:
        client.close()


def quota_error(answer: dict[str, Any], quota: str, limit: int) -> None:
    """The refusal: -32004 with reason QUOTA_EXCEEDED first in `data`, naming the quota and its limit in the
    message and in `metadata` (what SDK clients read)."""
    assert "result" not in answer, f"expected a refusal, got {str(answer)[:300]}"
    error = answer["error"]
    info = error["data"][0]
    assert (error["code"], info["reason"], info["domain"]) == (-32004, "QUOTA_EXCEEDED", PROFILE)
    assert info["metadata"] == {"reason": "QUOTA_EXCEEDED", "quota": quota, "limit": str(limit)}
    assert quota in error["message"] and f"at most {limit}" in error["message"]


def unchanged(table_items: TableScan, caller: Caller, refused: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`refused()`'s answer, having checked that the table is the same before and after it: the items of these
    Agents, and the caller's quota counts."""
    agents, counts = (BUSY, ASKS), layout.subject_quota(Owner(subject=caller.subject, agent=BUSY))

    def counted() -> list[dict[str, Any]]:
        return [i for i in table_items() if {k: v["S"] for k, v in i.items() if k in ("PK", "SK")} == counts]

    before, before_counts = settled(table_items, agents), counted()
    answer = refused()
    assert snapshot(table_items, agents) == before, "a refused request wrote to the table"
    assert counted() == before_counts and before_counts, "a refused request changed the caller's counts"
    return answer


@pytest.mark.parametrize("quotas", [UNLIMITED, DEFAULTS], ids=["before", "after"])
def test_forty_turns_queued_behind_one_busy_context(
    caller: Callable[[Quotas], Caller], table_items: TableScan, quotas: Quotas
) -> None:
    # Given a context held by a turn that does not end
    client, context = caller(quotas), str(uuid.uuid4())
    assert "result" in client.send(BUSY, "hold", context)
    # When the caller sends 40 more messages to it, as fast as it can
    started = time.monotonic()
    answers = [client.send(BUSY, f"more {i}", context) for i in range(40)]
    took = time.monotonic() - started
    queued = [a for a in answers if "result" in a]
    # Then before quotas, all 40 were queued (SUBMITTED) behind it
    if quotas is UNLIMITED:
        assert len(queued) == 40, f"{len(queued)} queued in {took:.1f} s"
        assert {a["result"]["task"]["status"]["state"] for a in queued} == {"TASK_STATE_SUBMITTED"}
        return
    # And with quotas, the context holds at most its limit (the busy turn and 9 queued), the rest refused
    limit = DEFAULTS.turns_per_context
    assert len(queued) == limit - 1
    for answer in answers[limit - 1 :]:
        quota_error(answer, "turnsPerContext", limit)
    # And a refused message writes nothing
    quota_error(unchanged(table_items, client, lambda: client.send(BUSY, "one more", context)), "turnsPerContext", limit)


@pytest.mark.parametrize("quotas", [UNLIMITED, Quotas(turns_per_subject=5)], ids=["before", "after"])
def test_one_subject_opens_turns_in_context_after_context(
    caller: Callable[[Quotas], Caller], table_items: TableScan, quotas: Quotas
) -> None:
    # Given a caller whose turns each wait for a person (open, in contexts of their own)
    client = caller(quotas)
    # When it opens 12 of them
    answers = [client.send(ASKS, "hi", str(uuid.uuid4())) for _ in range(12)]
    opened = [a["result"]["task"] for a in answers if "result" in a]
    if quotas is UNLIMITED:
        # Then before quotas, all 12 were accepted
        assert len(opened) == 12
        return
    # Then with a quota of 5 open turns per subject, 5 were accepted and the rest refused, writing nothing
    assert len(opened) == 5
    quota_error(answers[5], "turnsPerSubject", 5)
    quota_error(unchanged(table_items, client, lambda: client.send(ASKS, "hi", str(uuid.uuid4()))), "turnsPerSubject", 5)
    # When one of them is canceled, there is room for one more
    assert "result" in client.call(ASKS, "CancelTask", {"id": opened[0]["id"]})
    assert "result" in client.send(ASKS, "hi", str(uuid.uuid4()))
    quota_error(client.send(ASKS, "hi", str(uuid.uuid4())), "turnsPerSubject", 5)


def config(index: int, url: str, task_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": f"cfg-{index}", "url": url}
    return body | ({"taskId": task_id} if task_id else {})


@pytest.mark.parametrize("quotas", [UNLIMITED, DEFAULTS], ids=["before", "after"])
def test_unlimited_push_configs_on_one_task(
    caller: Callable[[Quotas], Caller], table_items: TableScan, quotas: Quotas
) -> None:
    # Given a task waiting for its caller
    client = caller(quotas)
    task = client.send(ASKS, "hi", str(uuid.uuid4()))["result"]["task"]
    # When the caller registers 50 push configs on it
    answers = [client.call(ASKS, "CreateTaskPushNotificationConfig", config(i, client.hook, task["id"])) for i in range(50)]
    created = [a for a in answers if "result" in a]
    listed = client.call(ASKS, "ListTaskPushNotificationConfigs", {"taskId": task["id"], "pageSize": 100})
    if quotas is UNLIMITED:
        # Then before quotas, all 50 were kept (each one more delivery per event: a push stall)
        assert len(created) == 50 and len(listed["result"]["configs"]) == 50
        return
    # Then with quotas, the task keeps its 10 and the rest are refused, writing nothing
    limit = DEFAULTS.push_configs_per_task
    assert len(created) == limit and len(listed["result"]["configs"]) == limit
    quota_error(answers[limit], "pushConfigsPerTask", limit)
    again = unchanged(
        table_items, client, lambda: client.call(ASKS, "CreateTaskPushNotificationConfig", config(99, client.hook, task["id"]))
    )
    quota_error(again, "pushConfigsPerTask", limit)
    # And replacing a config it has (same id) is not a new one
    assert "result" in client.call(ASKS, "CreateTaskPushNotificationConfig", config(0, client.hook, task["id"]))


@pytest.mark.parametrize("quotas", [UNLIMITED, Quotas(push_configs_per_subject=3)], ids=["before", "after"])
def test_push_configs_spread_over_a_subjects_tasks(
    caller: Callable[[Quotas], Caller], table_items: TableScan, quotas: Quotas
) -> None:
    # Given a caller that sends each message with a push config (SendMessage's taskPushNotificationConfig)
    client = caller(quotas)

    def send_with_config(index: int) -> dict[str, Any]:
        return client.send(ASKS, "hi", str(uuid.uuid4()), taskPushNotificationConfig=config(index, client.hook))

    # When it sends 6 of them
    answers = [send_with_config(i) for i in range(6)]
    accepted = [a for a in answers if "result" in a]
    if quotas is UNLIMITED:
        assert len(accepted) == 6
        return
    # Then with a quota of 3 configs on its open tasks, the 4th message is refused with its config: no task
    assert len(accepted) == 3
    quota_error(answers[3], "pushConfigsPerSubject", 3)
    quota_error(unchanged(table_items, client, lambda: send_with_config(7)), "pushConfigsPerSubject", 3)
    # When one of its tasks ends (canceled), its config leaves the count: the next message is accepted
    assert "result" in client.call(ASKS, "CancelTask", {"id": accepted[0]["result"]["task"]["id"]})
    assert "result" in send_with_config(8)
