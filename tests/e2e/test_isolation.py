"""End to end, raw HTTP: one subject never sees, touches or counts another subject's tasks.

Profile v2, "Caller" (docs/profile.md §1): every read and list is scoped to the authenticated subject; another subject's task
is "not found" (docs/protocol.md §2.6). And a caller without valid credentials gets HTTP 401 and writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from conftest import ALICE, BOB, rpc, user_message
from nylorun_local.runtime import LocalRuntime
from table_scope import TableScan, settled, snapshot

pytestmark = pytest.mark.e2e


# ---------------------------------------------------------------------------------------------- helpers
def error_code(answer: dict[str, Any]) -> int:
    assert "result" not in answer, f"expected an error, got {str(answer)[:400]}"
    info = answer["error"]["data"][0]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    if answer["error"]["code"] == -32001:
        assert info["reason"] == "TASK_NOT_FOUND"
    return int(answer["error"]["code"])


def all_tasks(url: str, token: str, **filters: Any) -> tuple[list[dict[str, Any]], int]:
    """Every task ListTasks shows `token`'s subject (all pages), and the totalSize of the first page."""
    tasks: list[dict[str, Any]] = []
    params: dict[str, Any] = {"pageSize": 100, **filters}
    first_total: int | None = None
    while True:
        result = rpc(url, "ListTasks", params, token=token)["result"]
        if first_total is None:
            first_total = int(result["totalSize"])
        tasks.extend(result["tasks"])
        if not result["nextPageToken"]:
            return tasks, first_total
        params = {**params, "pageToken": result["nextPageToken"]}


def send(url: str, token: str, text: str, **message_fields: Any) -> dict[str, Any]:
    answer = rpc(url, "SendMessage", {"message": user_message(text, **message_fields)}, token=token)
    assert "error" not in answer, answer
    return dict(answer["result"]["task"])


@pytest.fixture(scope="module")
def echo_url(local_runtime: LocalRuntime) -> str:
    return local_runtime.agent_url("echo")


@pytest.fixture(scope="module")
def alice_task(echo_url: str) -> dict[str, Any]:
    """Alice's completed echo task, with one push config of hers on it."""
    task = send(echo_url, ALICE, "alice's secret")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    config = rpc(
        echo_url,
        "CreateTaskPushNotificationConfig",
        {"taskId": task["id"], "url": "https://hooks.example.com/alice", "token": "alice-push-token"},
    )
    assert "error" not in config, config
    task["pushConfigId"] = config["result"]["id"]
    return task


@pytest.fixture(scope="module")
def alice_waiting_task(local_runtime: LocalRuntime) -> Iterator[dict[str, Any]]:
    """Alice's tck task waiting for her answer (INPUT_REQUIRED): cancelable and answerable, by her only."""
    url = local_runtime.agent_url("tck")
    task = send(url, ALICE, "start", message_id=f"tck-input-required-{uuid.uuid4()}")
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    yield task
    rpc(url, "CancelTask", {"id": task["id"]})  # end the parked turn


# ---------------------------------------------------------------------------------------------- tasks
@pytest.mark.parametrize(
    ("method", "params"),
    [
        pytest.param("GetTask", lambda t: {"id": t["id"]}, id="GetTask"),
        pytest.param("GetTask", lambda t: {"id": t["id"], "historyLength": 10}, id="GetTask-history"),
        pytest.param("CancelTask", lambda t: {"id": t["id"]}, id="CancelTask"),
        pytest.param(
            "SendMessage",
            lambda t: {"message": user_message("bob was here", taskId=t["id"])},
            id="SendMessage-taskId",
        ),
        pytest.param(
            "SendMessage",
            lambda t: {"message": user_message("bob was here", taskId=t["id"], contextId=t["contextId"])},
            id="SendMessage-taskId-contextId",
        ),
        pytest.param(
            "CreateTaskPushNotificationConfig",
            lambda t: {"taskId": t["id"], "url": "https://hooks.example.com/bob"},
            id="CreatePushConfig",
        ),
        pytest.param(
            "GetTaskPushNotificationConfig",
            lambda t: {"taskId": t["id"], "id": t["pushConfigId"]},
            id="GetPushConfig",
        ),
        pytest.param("ListTaskPushNotificationConfigs", lambda t: {"taskId": t["id"]}, id="ListPushConfigs"),
        pytest.param(
            "DeleteTaskPushNotificationConfig",
            lambda t: {"taskId": t["id"], "id": t["pushConfigId"]},
            id="DeletePushConfig",
        ),
    ],
)
def test_bob_cannot_reach_alices_task(
    echo_url: str,
    table_items: TableScan,
    alice_task: dict[str, Any],
    method: str,
    params: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    # Given: alice's completed task with her push config
    before = settled(table_items)
    # When: bob names it
    answer = rpc(echo_url, method, params(alice_task), token=BOB)
    # Then: not found (never "forbidden"), nothing changed, and alice still has her config
    assert error_code(answer) == -32001
    assert "alice's secret" not in str(answer)
    assert snapshot(table_items) == before
    mine = rpc(
        echo_url,
        "GetTaskPushNotificationConfig",
        {"taskId": alice_task["id"], "id": alice_task["pushConfigId"]},
    )
    assert mine["result"]["url"] == "https://hooks.example.com/alice"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        pytest.param("CancelTask", lambda t: {"id": t["id"]}, id="CancelTask"),
        pytest.param(
            "SendMessage",
            lambda t: {"message": user_message("bob's answer", taskId=t["id"])},
            id="SendMessage-answer",
        ),
    ],
)
def test_bob_cannot_cancel_or_answer_alices_waiting_task(
    local_runtime: LocalRuntime,
    table_items: TableScan,
    alice_waiting_task: dict[str, Any],
    method: str,
    params: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    # Given: alice's task waits for her answer, so a cancel or an answer would succeed for her
    url = local_runtime.agent_url("tck")
    before = settled(table_items)
    # When
    answer = rpc(url, method, params(alice_waiting_task), token=BOB)
    # Then
    assert error_code(answer) == -32001
    assert snapshot(table_items) == before
    still = rpc(url, "GetTask", {"id": alice_waiting_task["id"]})["result"]
    assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


def test_a_task_is_not_found_through_another_agent(
    local_runtime: LocalRuntime, table_items: TableScan, alice_task: dict[str, Any]
) -> None:
    # Given: alice's echo task
    before = settled(table_items)
    # When: alice herself asks the tck agent for it
    answer = rpc(local_runtime.agent_url("tck"), "GetTask", {"id": alice_task["id"]})
    # Then: tasks are scoped to the agent too
    assert error_code(answer) == -32001
    assert snapshot(table_items) == before


def test_bobs_list_neither_shows_nor_counts_alices_tasks(echo_url: str, alice_task: dict[str, Any]) -> None:
    # Given: bob's view of his tasks
    bob_tasks, bob_total = all_tasks(echo_url, BOB)
    # When: alice creates one more task
    alice_new = send(echo_url, ALICE, "another of alice's")
    bob_tasks_after, bob_total_after = all_tasks(echo_url, BOB)
    # Then: bob's list and totalSize are his alone, before and after
    bob_ids = {t["id"] for t in bob_tasks_after}
    assert alice_task["id"] not in bob_ids
    assert alice_new["id"] not in bob_ids
    assert bob_total_after == bob_total == len(bob_tasks_after) == len(bob_tasks)
    # ...and filtering by alice's context shows bob nothing at all
    by_context = rpc(echo_url, "ListTasks", {"contextId": alice_task["contextId"]}, token=BOB)["result"]
    assert by_context["tasks"] == []
    assert by_context["totalSize"] == 0
    assert by_context["nextPageToken"] == ""
    # ...while alice does see both of hers
    alice_ids = {t["id"] for t in all_tasks(echo_url, ALICE)[0]}
    assert {alice_task["id"], alice_new["id"]} <= alice_ids


def test_the_same_context_id_is_a_separate_context_per_subject(echo_url: str) -> None:
    # Given: one contextId string, chosen by the client, used by both subjects
    context_id = f"shared-{uuid.uuid4()}"
    # When
    alices = send(echo_url, ALICE, "alice in the shared context", contextId=context_id)
    bobs = send(echo_url, BOB, "bob in the shared context", contextId=context_id)
    # Then: two tasks, each in its subject's own context
    assert alices["id"] != bobs["id"]
    assert alices["contextId"] == bobs["contextId"] == context_id
    for token, mine, theirs, text, other_text in (
        (ALICE, alices, bobs, "alice in the shared context", "bob in the shared context"),
        (BOB, bobs, alices, "bob in the shared context", "alice in the shared context"),
    ):
        listed = rpc(echo_url, "ListTasks", {"contextId": context_id, "historyLength": 10}, token=token)[
            "result"
        ]
        assert [t["id"] for t in listed["tasks"]] == [mine["id"]]
        assert listed["totalSize"] == 1
        history = str(listed["tasks"][0].get("history"))
        assert text in history and other_text not in history
        assert error_code(rpc(echo_url, "GetTask", {"id": theirs["id"]}, token=token)) == -32001


def test_reusing_another_subjects_message_id_does_not_return_their_task(echo_url: str) -> None:
    # Given: alice's task made by a messageId (a repeated messageId answers with the task it made)
    message_id = f"m-shared-{uuid.uuid4()}"
    alices = send(echo_url, ALICE, "alice's words", message_id=message_id)
    # When: bob sends a message with the same messageId
    bobs = send(echo_url, BOB, "bob's words", message_id=message_id)
    # Then: bob gets a task of his own, not alice's
    assert bobs["id"] != alices["id"]
    assert "alice's words" not in str(bobs)


# ---------------------------------------------------------------------------------------------- credentials
@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param(None, id="missing"),
        pytest.param("Bearer tok-mallory", id="unknown-token"),
        pytest.param("Bearer", id="scheme-without-token"),
        pytest.param("Basic dG9rLWFsaWNlOg==", id="basic-scheme"),
        pytest.param(f"Basic {ALICE}", id="basic-with-a-valid-token"),
        pytest.param(ALICE, id="token-without-scheme"),
        pytest.param(f"Bearer {ALICE}x", id="token-prefix"),
    ],
)
def test_without_valid_credentials_the_answer_is_401_and_nothing_is_written(
    echo_url: str, table_items: TableScan, authorization: str | None
) -> None:
    # Given: a valid send with missing or bad credentials
    headers = {
        "A2A-Version": "1.0",
        **({"Authorization": authorization} if authorization is not None else {}),
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": user_message("no creds")},
    }
    before = settled(table_items)
    # When
    response = httpx.post(echo_url, json=body, headers=headers, timeout=30)
    # Then: RFC 6750: 401 with a Bearer challenge
    assert response.status_code == 401, response.text
    assert response.headers.get("www-authenticate", "").lower().startswith("bearer")
    assert "result" not in response.text
    assert "Traceback" not in response.text
    assert snapshot(table_items) == before


def test_the_bearer_scheme_is_case_insensitive(echo_url: str) -> None:
    # Given: auth schemes are case-insensitive (docs/protocol.md §10.1)
    headers = {"A2A-Version": "1.0", "Authorization": f"bearer {BOB}"}
    # When
    response = httpx.post(
        echo_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
        headers=headers,
        timeout=30,
    )
    # Then
    assert response.status_code == 200
    assert "result" in response.json()


def test_the_card_needs_no_credentials(echo_url: str) -> None:
    # When: an anonymous caller discovers the agent
    response = httpx.get(echo_url + "/.well-known/agent-card.json", timeout=30)
    # Then: the card is public; it says how to authenticate
    assert response.status_code == 200
    assert "bearer" in response.json()["securitySchemes"]
