"""A Runtime without a push secret: push configs are refused with -32003 and the card says
`pushNotifications: false` (docs/protocol.md §8.1, §9.2; Profile v2 "Card", docs/profile.md §3).

No second server: an app is built over the same stack as the running local Runtime (same table, same
state machine, same agents), with only `push_secret` taken away, and called in-process.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from conftest import BOB, auth, rpc, user_message
from fastapi.testclient import TestClient
from nylorun.wiring import Runtime
from nylorun_local.runtime import LocalRuntime
from table_scope import TableScan, settled, snapshot

pytestmark = pytest.mark.e2e

ECHO = "/v1/a2a/agents/echo"


@pytest.fixture(scope="module")
def push_off(local_runtime: LocalRuntime) -> Iterator[TestClient]:
    running = local_runtime.runtime
    assert running is not None
    runtime = Runtime(
        settings=running.settings.model_copy(update={"push_secret": None}), registry=running.registry
    )
    with TestClient(runtime.app()) as client:
        yield client


@pytest.fixture(scope="module")
def alice_task(local_runtime: LocalRuntime) -> dict[str, Any]:
    """Alice's task, made through the real server (push is on there) with a push config of hers."""
    url = local_runtime.agent_url("echo")
    task = dict(rpc(url, "SendMessage", {"message": user_message("push-off")})["result"]["task"])
    created = rpc(
        url, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": "https://hooks.example.com/a"}
    )
    task["pushConfigId"] = created["result"]["id"]
    return task


def call(client: TestClient, method: str, params: Any, token: str | None = None) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": "p-1", "method": method, "params": params}
    response = client.post(ECHO, json=body, headers=auth(token) if token else auth())
    assert response.status_code == 200, response.text
    assert "Traceback" not in response.text
    return dict(response.json())


def assert_push_not_supported(answer: dict[str, Any]) -> None:
    assert "result" not in answer, answer
    assert answer["error"]["code"] == -32003, answer
    info = answer["error"]["data"][0]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
    assert info["domain"] == "a2a-protocol.org"


def test_the_card_says_push_notifications_false(push_off: TestClient, local_runtime: LocalRuntime) -> None:
    # When
    card = push_off.get(ECHO + "/.well-known/agent-card.json").json()
    # Then: and nothing else of the card changes
    assert card["capabilities"]["pushNotifications"] is False
    assert card["capabilities"]["streaming"] is False
    assert len(card["capabilities"]["extensions"]) == 5
    assert card["supportedInterfaces"][0]["url"] == "http://testserver/v1/a2a/agents/echo/"


def test_the_running_runtime_still_says_push_notifications_true(local_runtime: LocalRuntime) -> None:
    # Given: the push-off app was built from a copy of the settings
    # When
    card = httpx.get(local_runtime.agent_url("echo") + "/.well-known/agent-card.json", timeout=30).json()
    # Then
    assert card["capabilities"]["pushNotifications"] is True


@pytest.mark.parametrize(
    ("method", "params"),
    [
        pytest.param(
            "CreateTaskPushNotificationConfig",
            lambda t: {"taskId": t["id"], "url": "https://hooks.example.com/b"},
            id="Create",
        ),
        pytest.param(
            "GetTaskPushNotificationConfig", lambda t: {"taskId": t["id"], "id": t["pushConfigId"]}, id="Get"
        ),
        pytest.param("ListTaskPushNotificationConfigs", lambda t: {"taskId": t["id"]}, id="List"),
        pytest.param(
            "DeleteTaskPushNotificationConfig",
            lambda t: {"taskId": t["id"], "id": t["pushConfigId"]},
            id="Delete",
        ),
        pytest.param(
            "SendMessage",
            lambda t: {
                "message": user_message(f"push-off send {uuid.uuid4()}"),
                "configuration": {"taskPushNotificationConfig": {"url": "https://hooks.example.com/c"}},
            },
            id="SendMessage-with-push-config",
        ),
    ],
)
def test_push_methods_are_push_notification_not_supported(
    push_off: TestClient,
    table_items: TableScan,
    alice_task: dict[str, Any],
    method: str,
    params: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    # Given: alice's task, with a push config made while push was on
    before = settled(table_items)
    # When: she calls a push method on the push-off Runtime
    answer = call(push_off, method, params(alice_task))
    # Then: -32003, and her config is neither deleted nor joined by another
    assert_push_not_supported(answer)
    assert snapshot(table_items) == before


def test_push_off_is_answered_before_task_lookup(push_off: TestClient, alice_task: dict[str, Any]) -> None:
    # When: bob asks about alice's task, and alice about a task that does not exist
    for token, task_id in ((BOB, alice_task["id"]), (None, "no-such-task")):
        answer = call(push_off, "ListTaskPushNotificationConfigs", {"taskId": task_id}, token=token)
        # Then: the capability answer is the same for everyone, so it reveals nothing about tasks
        assert_push_not_supported(answer)


def test_other_methods_still_work_without_push(push_off: TestClient, alice_task: dict[str, Any]) -> None:
    # When
    answer = call(push_off, "GetTask", {"id": alice_task["id"]})
    # Then
    assert answer["result"]["id"] == alice_task["id"]


def test_with_push_off_a_caller_gets_no_signing_secrets_but_a_404_saying_why(push_off: TestClient) -> None:
    # When an authenticated caller asks for its push signing keys on a Runtime without a push secret
    answer = push_off.get("/v1/a2a/push-signing-secrets", headers=auth())
    # Then it is told push is off (404: no delivery will ever be signed), not handed an empty list to wait with
    assert answer.status_code == 404, answer.text
    assert answer.json() == {"error": "Push notifications are off on this Runtime (it has no push secret)"}
    # And an unauthenticated caller learns nothing more than that it must authenticate
    assert push_off.get("/v1/a2a/push-signing-secrets").status_code == 401
