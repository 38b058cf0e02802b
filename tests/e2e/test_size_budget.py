"""Size budget end to end (docs/limits.md): what one task may accumulate, and how large an answer may get.

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
from nylorun.adapters.dynamodb import DynamoTaskStore
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.engine import Agent, Skill, Turn
from nylorun.ports import JournalEntry, NewTurn, Owner, TaskQuery, TaskStore, TooLarge
from nylorun.profile.extensions import Interaction
from nylorun.protocol.models import Artifact, Message, Part, Role, TaskState, TaskStatus
from nylorun_local.runtime import LocalRuntime
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
    settled(table_items, ["t-size-approve"])  # the parked turn's last write (its wait token) has landed
    for _ in range(26):
        # A text reply is written by the api before it answers, and nothing of it runs later: no need to settle
        before = snapshot(table_items, ["t-size-approve"])
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
    assert accepted == 16  # 4 MiB less the 64 KiB kept for the agent's answers: 16 replies of 250 KB
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


@pytest.mark.parametrize(
    ("agent", "text", "kept"),
    [
        pytest.param("t-size-reply", "500", 0, id="reply-larger-than-a-message"),
        pytest.param("t-size-artifacts", "20", 16, id="artifacts-past-the-task-budget"),
    ],
)
def test_agent_output_past_a_limit_fails_the_task_saying_so(
    local_runtime: LocalRuntime, agents: None, agent: str, text: str, kept: int
) -> None:
    # Given an agent that replies 500 KB (more than one stored message may hold), or one that writes 20
    # artifacts of 250 KB (5 MB, past the task's 4 MiB)
    url = local_runtime.agent_url(agent)
    # When it runs
    answer, _ = call(url, "SendMessage", {"message": user_message(text)})
    task = finished(url, answer["result"]["task"]["id"])
    # Then the task fails with a status saying why (not "could not complete" after three reruns, nor COMPLETED)
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "The agent's output exceeded the task's size budget" in status_text(task)
    # And it stays readable in one answer under 5 MiB, with the artifacts that fit
    got, size = call(url, "GetTask", {"id": task["id"]})
    assert size < MAX_ANSWER and len(got["result"].get("artifacts", [])) == kept


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


# ---------------------------------------------------------------- both stores keep the same budget
BUDGET = 700 * KB


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest, local_runtime: LocalRuntime) -> TaskStore:
    if request.param == "memory":
        return InMemoryTaskStore(max_task_bytes=BUDGET)
    assert local_runtime.stack is not None
    return DynamoTaskStore(local_runtime.aws.client("dynamodb"), local_runtime.stack.table_name, BUDGET)


def working(store: TaskStore, metadata: dict[str, Any] | None = None) -> tuple[str, Owner]:
    owner = Owner(subject=f"size-{uuid.uuid4()}", agent="echo")
    message = Message(message_id=f"m-{uuid.uuid4()}", role=Role.USER, parts=[Part(text="hi")])
    record, _ = store.create_turn(NewTurn(owner, f"ctx-{uuid.uuid4()}", message, metadata))
    store.set_status(record.task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    return record.task_id, owner


def agent_message(text: str) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.AGENT, parts=[Part(text=text)])


def test_stores_refuse_output_past_the_budget_and_write_nothing(store: TaskStore) -> None:
    # Given a working task holding three artifacts of 200 KB
    task_id, _ = working(store)
    for name in ("a", "b", "c"):
        store.put_artifact(task_id, Artifact(artifact_id=name, parts=[Part(text="x" * (200 * KB))]))
    # When a fourth would pass the 700 KB budget, or a 200 KB reply would
    with pytest.raises(TooLarge, match="at most 716800 bytes"):
        store.put_artifact(task_id, Artifact(artifact_id="d", parts=[Part(text="x" * (200 * KB))]))
    reply = agent_message("y" * (200 * KB))
    with pytest.raises(TooLarge):
        store.set_status(task_id, TaskStatus(state=TaskState.COMPLETED, message=reply), expect={TaskState.WORKING},
                         history=[reply])
    # Then nothing of them was written
    record = store.get(task_id)
    assert record is not None and record.state == TaskState.WORKING
    assert [a.artifact_id for a in record.artifacts] == ["a", "b", "c"] and len(record.history) == 1
    # And a rewrite counts only its new size, so a smaller "a" makes room for the reply
    store.put_artifact(task_id, Artifact(artifact_id="a", parts=[Part(text="small")]))
    store.set_status(task_id, TaskStatus(state=TaskState.COMPLETED, message=reply), expect={TaskState.WORKING},
                     history=[reply])
    # And the Runtime's own closing message is never refused
    closing = agent_message("z" * (200 * KB))
    store.set_status(task_id, TaskStatus(state=TaskState.FAILED, message=closing),
                     expect={TaskState.COMPLETED}, history=[closing], enforce_budget=False)


def test_stores_bound_one_message_and_one_interaction(store: TaskStore) -> None:
    task_id, _ = working(store)
    huge = agent_message("h" * (300 * KB))
    with pytest.raises(TooLarge, match="a message or artifact holds at most 262144 bytes"):
        store.set_status(task_id, TaskStatus(state=TaskState.WORKING, message=huge), expect={TaskState.WORKING})
    question = Interaction(interaction_id="q", kind="question", prompt="p" * (70 * KB))
    with pytest.raises(TooLarge, match="an interaction"):
        store.set_status(task_id, TaskStatus(state=TaskState.INPUT_REQUIRED), expect={TaskState.WORKING},
                         interaction=question, interaction_seq=1)
    record = store.get(task_id)
    assert record is not None and record.state == TaskState.WORKING and record.status.message is None


def test_stores_keep_room_for_the_agent_when_a_caller_answers(store: TaskStore) -> None:
    # Given a task waiting on a question, holding 450 KB of artifacts
    task_id, owner = working(store)
    for name in ("a", "b"):
        store.put_artifact(task_id, Artifact(artifact_id=name, parts=[Part(text="x" * (225 * KB))]))
    store.journal_start(task_id, JournalEntry(seq=1, kind="interaction", name="question"))
    question = Interaction(interaction_id="q", kind="question", prompt="Which?")
    store.set_status(task_id, TaskStatus(state=TaskState.INPUT_REQUIRED), expect={TaskState.WORKING},
                     interaction=question, interaction_seq=1)
    answer = Message(message_id=f"m-{uuid.uuid4()}", role=Role.USER, parts=[Part(text="v" * (200 * KB))])
    # When the caller's 200 KB answer would leave less than 64 KiB of the 700 KB
    with pytest.raises(TooLarge, match="a caller may fill 651264"):
        store.answer_interaction(
            task_id, "q", {"value": "v"}, answer, TaskStatus(state=TaskState.WORKING), owner, answer.retry_key()
        )
    with pytest.raises(TooLarge):
        store.append_history(task_id, [answer], None)
    # Then the question is still open, and a shorter answer is taken
    record = store.get(task_id)
    assert record is not None and record.interaction is not None and len(record.history) == 1
    short = answer.model_copy(update={"parts": [Part(text="short")]})
    store.answer_interaction(
        task_id, "q", {"value": "short"}, short, TaskStatus(state=TaskState.WORKING), owner, short.retry_key()
    )


def test_stores_keep_large_metadata_beside_a_large_status(store: TaskStore) -> None:
    # Given 160 KB of metadata, when the task completes with a 250 KB reply
    metadata = {"blob": "m" * (160 * KB)}
    task_id, owner = working(store, metadata)
    reply = agent_message("r" * (250 * KB))
    store.set_status(task_id, TaskStatus(state=TaskState.COMPLETED, message=reply), expect={TaskState.WORKING},
                     history=[reply])
    # Then both read back whole, from GetTask's read and from a list
    record = store.get(task_id)
    assert record is not None and record.metadata == metadata and record.status.message == reply
    page = store.list_tasks(owner, TaskQuery())
    assert page.tasks[0].metadata == metadata and page.tasks[0].status.message == reply


def test_stores_hand_out_a_token_after_each_listed_task(store: TaskStore) -> None:
    _, owner = working(store)
    for _ in range(2):
        message = Message(message_id=f"m-{uuid.uuid4()}", role=Role.USER, parts=[Part(text="hi")])
        store.create_turn(NewTurn(owner, f"ctx-{uuid.uuid4()}", message))
    page = store.list_tasks(owner, TaskQuery(page_size=3))
    assert len(page.tokens) == 3 and page.next_page_token == ""
    rest = store.list_tasks(owner, TaskQuery(page_size=3, page_token=page.tokens[0]))
    assert [t.task_id for t in rest.tasks] == [t.task_id for t in page.tasks[1:]]
