"""Isolation as a matrix: every A2A method, called by one subject on the other's task (finished, or waiting
for its owner's answer) and push config, in both directions, is "task not found" (-32001), leaks nothing of
the owner's, and changes nothing either subject can see (the owner's tasks and configs, the caller's task
count). And ListTasks' totals and pages never count or show the other's tasks.

tests/e2e/test_isolation.py checks bob against alice method by method; this compact matrix adds the
reverse direction, the waiting task for every method, configs named through one's own task, and paging.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from nylorun_local.runtime import LocalRuntime
from reliability_kit import ALICE, BOB, all_tasks, error_code, rpc, user_message

pytestmark = pytest.mark.e2e

SUBJECTS = {ALICE: "alice", BOB: "bob"}
Params = Callable[[dict[str, Any]], dict[str, Any]]
# Method, how its params name the owner's task, and the code the other subject gets.
MATRIX: list[tuple[str, str, Params, int]] = [
    ("GetTask", "", lambda t: {"id": t["id"]}, -32001),
    ("GetTask", "history", lambda t: {"id": t["id"], "historyLength": 50}, -32001),
    ("CancelTask", "", lambda t: {"id": t["id"]}, -32001),
    ("SendMessage", "continue", lambda t: {"message": user_message("intruder", taskId=t["id"])}, -32001),
    (
        "SendMessage",
        "continue-in-context",
        lambda t: {"message": user_message("intruder", taskId=t["id"], contextId=t["contextId"])},
        -32001,
    ),
    (
        "SendMessage",
        "typed-answer",
        lambda t: {
            "message": user_message(
                "approved",
                taskId=t["id"],
                extensions=["https://docs.nylorun.com/a2a/interactions/v1"],
                metadata={"https://docs.nylorun.com/a2a/interactions/v1": {"interactionId": "ia-x", "approved": True}},
            )
        },
        -32001,
    ),
    ("CreateTaskPushNotificationConfig", "", lambda t: {"taskId": t["id"], "url": "https://hooks.example.com/intruder"}, -32001),
    ("GetTaskPushNotificationConfig", "", lambda t: {"taskId": t["id"], "id": t["configId"]}, -32001),
    ("ListTaskPushNotificationConfigs", "", lambda t: {"taskId": t["id"]}, -32001),
    ("DeleteTaskPushNotificationConfig", "", lambda t: {"taskId": t["id"], "id": t["configId"]}, -32001),
    # Streaming is refused to everyone (-32004): it must still say nothing of the owner's task.
    ("SubscribeToTask", "", lambda t: {"id": t["id"]}, -32004),
]


def owned_task(local_runtime: LocalRuntime, token: str, kind: str) -> dict[str, Any]:
    """A task of `token`'s subject with a push config (credentials and token), and the strings that are
    the owner's alone: none of them may reach the other subject."""
    secret = f"{SUBJECTS[token]}-secret-{uuid.uuid4()}"
    agent = "echo" if kind == "finished" else "tck"
    message_id = f"m-{uuid.uuid4()}" if kind == "finished" else f"tck-input-required-{uuid.uuid4()}"
    url = local_runtime.agent_url(agent)
    answer = rpc(url, "SendMessage", {"message": user_message(secret, message_id=message_id)}, token=token)
    task = dict(answer["result"]["task"])
    assert task["status"]["state"] == ("TASK_STATE_COMPLETED" if kind == "finished" else "TASK_STATE_INPUT_REQUIRED")
    hook = f"https://hooks.example.com/{secret}"
    config = rpc(
        url,
        "CreateTaskPushNotificationConfig",
        {"taskId": task["id"], "url": hook, "token": f"tok-{secret}", "authentication": {"scheme": "Bearer", "credentials": f"cred-{secret}"}},
        token=token,
    )["result"]
    return {
        **task,
        "url": url,
        "configId": config["id"],
        "hook": hook,
        "secrets": [secret, task["contextId"], hook, f"tok-{secret}", f"cred-{secret}"],
    }


@pytest.fixture(scope="module")
def tasks(local_runtime: LocalRuntime) -> Iterator[dict[tuple[str, str], dict[str, Any]]]:
    cases = [(token, kind) for token in SUBJECTS for kind in ("finished", "waiting")]
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        made = dict(zip(cases, pool.map(lambda case: owned_task(local_runtime, *case), cases)))
    yield made
    for (token, kind), task in made.items():
        if kind == "waiting":
            rpc(task["url"], "CancelTask", {"id": task["id"]}, token=token)  # end the parked turn


def views(targets: list[dict[str, Any]], owner: str, caller: str) -> list[Any]:
    """Everything either subject can see that a call could have changed: the owner's tasks (status, history,
    artifacts) and their push configs, and how many tasks the caller has on each agent."""
    seen: list[Any] = []
    for target in targets:
        seen.append(rpc(target["url"], "GetTask", {"id": target["id"]}, token=owner)["result"])
        seen.append(rpc(target["url"], "ListTaskPushNotificationConfigs", {"taskId": target["id"]}, token=owner)["result"])
    for target in targets:
        seen.append(rpc(target["url"], "ListTasks", {"pageSize": 1}, token=caller)["result"]["totalSize"])
    return seen


@pytest.mark.parametrize(("caller", "owner"), [(BOB, ALICE), (ALICE, BOB)], ids=["bob-on-alice", "alice-on-bob"])
def test_every_method_on_the_other_subjects_task_is_not_found(
    tasks: dict[tuple[str, str], dict[str, Any]], caller: str, owner: str
) -> None:
    # Given the owner's tasks (one finished, one waiting for the owner's answer), each with a push config
    targets = [tasks[(owner, "finished")], tasks[(owner, "waiting")]]
    before = views(targets, owner, caller)
    # When the other subject calls every method on each of them
    wrong: list[str] = []
    for target, kind in zip(targets, ("finished", "waiting")):
        for method, variant, params, code in MATRIX:
            answer = rpc(target["url"], method, params(target), token=caller)
            text = json.dumps(answer)
            name = f"{method}[{variant}] on the {kind} task" if variant else f"{method} on the {kind} task"
            if "result" in answer or error_code(answer) != code:
                wrong.append(f"{name}: {text[:300]}")
            leaked = [s for s in target["secrets"] if s in text]
            if leaked:
                wrong.append(f"{name} leaks {leaked}")
    # Then each one is "not found" and says nothing of the owner's
    assert not wrong, "\n".join(wrong)
    # And nothing changed: the owner's tasks and configs are as they were, and the caller got no task
    assert views(targets, owner, caller) == before


@pytest.mark.parametrize(("caller", "owner"), [(BOB, ALICE), (ALICE, BOB)], ids=["bob-on-alice", "alice-on-bob"])
def test_the_other_subjects_config_is_not_found_through_ones_own_task(
    tasks: dict[tuple[str, str], dict[str, Any]], caller: str, owner: str
) -> None:
    # Given the caller's own task, and the owner's config id (on the owner's task)
    mine, theirs = tasks[(caller, "finished")], tasks[(owner, "finished")]
    before = views([theirs], owner, caller)
    # When the caller names the owner's config through its own task
    got = rpc(mine["url"], "GetTaskPushNotificationConfig", {"taskId": mine["id"], "id": theirs["configId"]}, token=caller)
    listed = rpc(mine["url"], "ListTaskPushNotificationConfigs", {"taskId": mine["id"]}, token=caller)["result"]
    deleted = rpc(mine["url"], "DeleteTaskPushNotificationConfig", {"taskId": mine["id"], "id": theirs["configId"]}, token=caller)
    # Then it is not found, its own list holds only its own config, and the delete touched nothing
    assert error_code(got) == -32001
    assert [c["id"] for c in listed["configs"]] == [mine["configId"]]
    assert "error" not in deleted
    for secret in theirs["secrets"]:
        assert secret not in json.dumps([got, listed, deleted])
    assert views([theirs], owner, caller) == before


def test_list_pages_and_totals_hold_only_the_callers_tasks(local_runtime: LocalRuntime) -> None:
    # Given one contextId string used by both subjects, two tasks each
    url = local_runtime.agent_url("echo")
    context_id = f"shared-{uuid.uuid4()}"
    made: dict[str, set[str]] = {ALICE: set(), BOB: set()}
    for token in (ALICE, BOB, ALICE, BOB):
        answer = rpc(url, "SendMessage", {"message": user_message(f"{SUBJECTS[token]} speaks", contextId=context_id)}, token=token)
        made[token].add(answer["result"]["task"]["id"])
    for token, other in ((ALICE, BOB), (BOB, ALICE)):
        # When each pages through that context one task at a time
        pages: list[dict[str, Any]] = []
        params: dict[str, Any] = {"contextId": context_id, "pageSize": 1, "historyLength": 5}
        while len(pages) < 10:
            page = rpc(url, "ListTasks", params, token=token)["result"]
            pages.append(page)
            if not page["nextPageToken"]:
                break
            params = {**params, "pageToken": page["nextPageToken"]}
        # Then two pages of its own tasks, a total of 2 on each, and none of the other's words
        assert sorted(t["id"] for page in pages for t in page["tasks"]) == sorted(made[token])
        assert [page["totalSize"] for page in pages] == [2, 2]
        assert f"{SUBJECTS[other]} speaks" not in json.dumps(pages)
        # And with a status filter too, the list (all pages) and its total are the caller's alone
        done, total = all_tasks(url, token, contextId=context_id, status="TASK_STATE_COMPLETED", pageSize=2)
        assert (sorted(t["id"] for t in done), total) == (sorted(made[token]), 2)
