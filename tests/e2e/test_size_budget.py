"""Size budget end to end (README "Limits"): what one task may accumulate, and how large an answer may get.

Lambda answers at most 6 MB (a 5xx on AWS past it) and a DynamoDB item holds at most 400 KB; these tests
drive the local Runtime (moto enforces the item limit) with 250 KB messages and assert what a caller sees.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest
from conftest import auth, rpc, user_message
from nylorun.engine import Agent, Skill, Turn
from nylorun.local.runtime import LocalRuntime
from table_scope import TableScan, settled, snapshot

MAX_ANSWER = 5 * 1024 * 1024  # no answer exceeds 5 MiB (Lambda's limit is 6 MB)
KB = 1024
REPLY = "r" * (250 * KB)  # a caller's 250 KB text reply


@pytest.fixture(scope="module")
def agents(local_runtime: LocalRuntime) -> None:
    def approve(turn: Turn) -> None:
        # Waits for a person: every text reply is recorded (text never approves) and the task keeps waiting.
        turn.reply("Approved." if turn.approval("Approve the big thing?") else "Not approved.")

    def big_reply(turn: Turn) -> None:
        turn.reply("a" * (int(turn.text) * KB))  # the message says how many KB to reply

    def artifacts(turn: Turn) -> None:
        for i in range(int(turn.text)):  # the message says how many 250 KB artifacts to write
            turn.artifact("b" * (250 * KB), name=f"part-{i}")
        turn.reply("Written.")

    for name, fn in {"t-size-approve": approve, "t-size-reply": big_reply, "t-size-artifacts": artifacts}.items():
        agent = Agent(name=name, description=f"test agent {name}", skills=[Skill(id="t", name="t", description="t", tags=["test"])])
        agent.turn(fn)
        local_runtime.add_agent(agent)


def call(url: str, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """One JSON-RPC call; returns the decoded answer and its size in bytes."""
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    response = httpx.post(url, json=body, headers=auth(), timeout=120)
    assert response.status_code == 200, response.text[:500]
    return dict(response.json()), len(response.content)


def finished(url: str, task_id: str) -> dict[str, Any]:
    """GetTask until the task ends (a turn that fails is rerun by the state machine first)."""
    deadline = time.monotonic() + 60
    while True:
        task = rpc(url, "GetTask", {"id": task_id, "historyLength": 1})["result"]
        if task["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED") or time.monotonic() > deadline:
            return task
        time.sleep(0.5)


def status_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in task["status"]["message"]["parts"])


# ---------------------------------------------------------------- a caller's input
def test_text_replies_to_a_waiting_task_stop_at_its_budget_and_answers_stay_under_5_mib(
    local_runtime: LocalRuntime, agents: None, table_items: TableScan
) -> None:
    # Given a task waiting for a person's approval
    url = local_runtime.agent_url("t-size-approve")
    task = rpc(url, "SendMessage", {"message": user_message("start")})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    # When the caller sends 26 text replies of 250 KB (6.5 MB in all)
    accepted, refused = 0, None
    for _ in range(26):
        before = settled(table_items, ["t-size-approve"])
        answer, size = call(url, "SendMessage", {"message": user_message(REPLY, taskId=task["id"])})
        assert size < MAX_ANSWER
        if "error" in answer:
            refused = answer["error"]
            # Then the reply that would pass the task's budget is refused, and nothing was written
            assert snapshot(table_items, ["t-size-approve"]) == before
            break
        accepted += 1
    assert refused is not None, "26 replies of 250 KB all went into one task"
    assert refused["code"] == -32602 and "size budget" in refused["message"]
    violations = [d for d in refused["data"] if d.get("@type", "").endswith("BadRequest")]
    assert violations[0]["fieldViolations"][0]["field"] == "message"
    # And the task still waits, readable in one answer under 5 MiB, with every accepted reply
    got, size = call(url, "GetTask", {"id": task["id"]})
    assert size < MAX_ANSWER and got["result"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    assert sum(m["role"] == "ROLE_USER" for m in got["result"]["history"]) == 1 + accepted
    assert accepted >= 10
    # And canceling it answers under 5 MiB too
    canceled, size = call(url, "CancelTask", {"id": task["id"]})
    assert size < MAX_ANSWER and canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"


# ---------------------------------------------------------------- an agent's output
def test_large_metadata_and_a_large_reply_together_complete_the_turn(local_runtime: LocalRuntime, agents: None) -> None:
    # Given a caller's 160 KB of task metadata
    url = local_runtime.agent_url("t-size-reply")
    metadata = {"blob": "m" * (160 * KB)}
    # When the agent replies 250 KB
    answer, size = call(url, "SendMessage", {"message": user_message("250"), "metadata": metadata})
    task = finished(url, answer["result"]["task"]["id"])
    # Then the turn completes with the whole reply and the whole metadata, in answers under 5 MiB
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", status_text(task)
    assert status_text(task) == "a" * (250 * KB)
    got, size = call(url, "GetTask", {"id": task["id"]})
    assert size < MAX_ANSWER and got["result"]["metadata"] == metadata
    listed, size = call(url, "ListTasks", {"contextId": task["contextId"]})
    assert size < MAX_ANSWER and listed["result"]["tasks"][0]["metadata"] == metadata


def test_a_reply_larger_than_a_message_may_be_fails_the_task_saying_so(local_runtime: LocalRuntime, agents: None) -> None:
    # Given an agent that replies 500 KB (more than one stored message may hold)
    url = local_runtime.agent_url("t-size-reply")
    # When it runs
    answer, _ = call(url, "SendMessage", {"message": user_message("500")})
    task = finished(url, answer["result"]["task"]["id"])
    # Then the task fails at once with a status saying why (not after reruns, as "could not complete")
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "size budget" in status_text(task)


def test_agent_output_past_the_task_budget_fails_the_task(local_runtime: LocalRuntime, agents: None) -> None:
    # Given an agent that writes 20 artifacts of 250 KB (5 MB)
    url = local_runtime.agent_url("t-size-artifacts")
    # When it runs
    answer, size = call(url, "SendMessage", {"message": user_message("20")})
    task = finished(url, answer["result"]["task"]["id"])
    # Then the task fails saying its output exceeded the task's size budget, and stays readable under 5 MiB
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "size budget" in status_text(task)
    got, size = call(url, "GetTask", {"id": task["id"]})
    assert size < MAX_ANSWER and 10 <= len(got["result"]["artifacts"]) < 20


# ---------------------------------------------------------------- ListTasks over many large tasks
def test_list_tasks_with_artifacts_pages_by_size(local_runtime: LocalRuntime, agents: None) -> None:
    # Given three tasks of 2 MB of artifacts each, in one context
    url = local_runtime.agent_url("t-size-artifacts")
    context = f"ctx-{uuid.uuid4()}"
    ids = set()
    for _ in range(3):
        answer, _ = call(url, "SendMessage", {"message": user_message("8", contextId=context)})
        task = finished(url, answer["result"]["task"]["id"])
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        ids.add(task["id"])
    # When ListTasks asks for all of them with their artifacts, following nextPageToken
    seen: list[str] = []
    token = ""
    for _ in range(4):
        listed, size = call(url, "ListTasks", {"contextId": context, "includeArtifacts": True, "pageToken": token})
        # Then every page answers under 5 MiB, and the pages together hold every task once, whole
        assert size < MAX_ANSWER
        tasks = listed["result"]["tasks"]
        assert tasks and all(len(t["artifacts"]) == 8 for t in tasks)
        seen += [t["id"] for t in tasks]
        token = listed["result"]["nextPageToken"]
        if not token:
            break
    assert sorted(seen) == sorted(ids)
