"""Least privilege, checked against what the code does. moto checks no IAM, and tests/static/test_least_privilege.py
checks the template against a hand-written list of actions, so a call the code makes outside its role's grant (an
action, or an item key the role's `dynamodb:LeadingKeys` leaves out) passes every other test and is refused only on
AWS: a fan-out in steps had its cursor (FANOUT#) refused that way. Here every DynamoDB call each function makes in a
push-heavy task (a turn that says something, a fan-out of three configs in steps of two, a config removed by its 410
Gone receiver, GetTask, ListTasks, CancelTask), and in a connection's life (a consent in flight, the connection stored,
used, refreshed, listed, revoked), is recorded with its item keys and checked against its role's statements in
template.yaml.
"""

from __future__ import annotations

import fnmatch
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.client import BaseClient
from conftest import ALICE, held_agent, poll, rpc, user_message, watch_clients
from nylorun_local import template
from nylorun_local.runtime import LocalRuntime
from webhook_receiver import Receiver, own_secrets

pytestmark = pytest.mark.e2e

# The role of each function (an AWS::IAM::Role of its own, or the function's Policies: SAM makes "<id>Role").
ROLES = {"api": "ApiFunction", "turn": "TurnFunctionRole", "dispatch": "DispatchFunction",
         "publish": "PublishFunction", "push": "PushFunction", "sweep": "SweepFunction"}  # fmt: skip
_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}


def _pk(key: dict[str, Any]) -> str:
    return str(key["PK"]["S"])


def table_uses(operation: str, params: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(IAM action, the item's partition key, or None for an index) of each item one DynamoDB call touches."""
    if operation in ("GetItem", "DeleteItem", "UpdateItem"):
        return [(operation, _pk(params["Key"]))]
    if operation == "PutItem":
        return [(operation, _pk(params["Item"]))]
    if operation == "Query":
        if "IndexName" in params:
            return [("Query", None)]
        values = params["ExpressionAttributeValues"]
        return [("Query", str(values[":pk"]["S"]))]
    if operation == "TransactWriteItems":
        uses = []
        for entry in params["TransactItems"]:
            ((kind, body),) = entry.items()
            uses.append((_TRANSACT[kind], _pk(body.get("Key") or body["Item"])))
        return uses
    if operation == "TransactGetItems":
        return [("GetItem", _pk(entry["Get"]["Key"])) for entry in params["TransactItems"]]
    return [(operation, None)]  # a batch or a scan: the action alone, which no role should hold


class Recorder:
    """Every DynamoDB call of the clients it is attached to: (function, IAM action, partition key)."""

    def __init__(self) -> None:
        self.uses: set[tuple[str, str, str | None]] = set()
        self.seen: set[int] = set()
        self.lock = threading.Lock()
        self.attached: list[tuple[BaseClient, str]] = []

    def attach(self, function: str, client: BaseClient) -> None:
        if id(client) in self.seen or client.meta.service_model.service_name != "dynamodb":
            return
        self.seen.add(id(client))

        def before(params: dict[str, Any], model: Any, **_: Any) -> None:
            uses = table_uses(model.name, params)
            with self.lock:
                self.uses |= {(function, f"dynamodb:{action}", pk) for action, pk in uses}

        # One id per recorder and client: botocore keeps the first handler of a unique_id, so an id per client
        # alone left a later test's recorder deaf to the clients an earlier one had attached.
        unique_id = f"iam-use-{id(self)}-{id(client)}"
        client.meta.events.register("before-parameter-build", before, unique_id=unique_id)
        self.attached.append((client, unique_id))

    def detach(self) -> None:
        for client, unique_id in self.attached:
            client.meta.events.unregister("before-parameter-build", unique_id=unique_id)


@pytest.fixture()
def recorder(local_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    recorder = Recorder()
    watch_clients(local_runtime, monkeypatch, recorder.attach)
    yield recorder
    recorder.detach()


def granted(function: str) -> list[tuple[set[str], list[str] | None]]:
    """The role's table statements: (actions, LeadingKeys patterns or None), policy templates as statements."""
    resource = template.load_template(template.TEMPLATE)["Resources"][ROLES[function]]
    props = resource["Properties"]
    policies = [p["PolicyDocument"] for p in props["Policies"]] if resource["Type"] == "AWS::IAM::Role" else props["Policies"]
    out: list[tuple[set[str], list[str] | None]] = []
    for policy in policies:
        if not isinstance(policy, dict) or "Statement" not in policy:
            continue  # policy templates here are SQS, Secrets Manager, EventBridge: no table actions
        for statement in _branches(policy["Statement"]):
            actions = {a for a in statement["Action"] if a.startswith("dynamodb:")}
            keys = ((statement.get("Condition") or {}).get("ForAllValues:StringLike") or {}).get("dynamodb:LeadingKeys")
            if actions:
                out.append((actions, list(keys) if keys is not None else None))
    return out


def _branches(statements: list[Any]) -> Iterator[dict[str, Any]]:
    """Each statement, and each branch of a conditional one (!If [condition, statement, AWS::NoValue])."""
    for statement in statements:
        if isinstance(statement, dict) and set(statement) == {"Fn::If"}:
            yield from (b for b in statement["Fn::If"][1:] if isinstance(b, dict) and "Action" in b)
        elif isinstance(statement, dict):
            yield statement


def refused(uses: set[tuple[str, str, str | None]]) -> list[str]:
    problems = []
    for function, action, pk in sorted(uses, key=str):
        statements = granted(function)
        if not any(action in actions and (pk is None or keys is None or any(fnmatch.fnmatchcase(pk, k) for k in keys))
                   for actions, keys in statements):  # fmt: skip
            problems.append(f"{function}: {action} on {pk or 'an index'}")
    return problems


def test_every_table_call_of_a_pushed_task_is_within_its_functions_role(
    local_runtime: LocalRuntime, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a held agent that adds an artifact (its publishing reads the task), a receiver, a fan-out in steps of
    # two, and a second receiver that answers 410 Gone
    hold = threading.Event()
    held_agent(local_runtime, "iam-held", hold, artifact="report")
    push = local_runtime._functions["PushFunction"].runtime
    monkeypatch.setattr(push.settings, "push_fan_out_step", 2)
    receiver = Receiver(own_secrets(local_runtime.base_url, ALICE))
    gone = Receiver(own_secrets(local_runtime.base_url, ALICE), answers=lambda n: (410, {}))
    try:
        url = local_runtime.agent_url("iam-held")
        # When a task runs with three push configs, one of them gone, and is read, listed; and another is canceled
        params = {"message": user_message("go"), "configuration": {
            "returnImmediately": True, "taskPushNotificationConfig": {"id": "c1", "url": receiver.url}}}  # fmt: skip
        task = rpc(url, "SendMessage", params, token=ALICE)["result"]["task"]
        for config_id, hook in (("c2", receiver), ("c3", gone)):
            config = {"taskId": task["id"], "id": config_id, "url": hook.url}
            assert "result" in rpc(url, "CreateTaskPushNotificationConfig", config, token=ALICE)
        hold.set()

        def completed() -> int:
            return sum(1 for r in receiver.requests if r["body"].get("statusUpdate", {}).get("status", {}).get("state")
                       == "TASK_STATE_COMPLETED")  # fmt: skip

        poll(completed, lambda n: n >= 2, timeout=60)
        poll(lambda: len(gone.requests), lambda n: n >= 1, timeout=30)
        assert "result" in rpc(url, "GetTask", {"id": task["id"]}, token=ALICE)
        assert "result" in rpc(url, "ListTasks", {}, token=ALICE)
        hold.clear()
        other = rpc(url, "SendMessage", {"message": user_message("stop"), "configuration": {"returnImmediately": True}},
                    token=ALICE)["result"]["task"]  # fmt: skip
        assert "result" in rpc(url, "CancelTask", {"id": other["id"]}, token=ALICE)
        hold.set()
        time.sleep(1.0)  # the canceled turn's own calls
    finally:
        hold.set()
        receiver.close()
        gone.close()

    # Then the functions made the calls this is about (a cursor item among them), and every one is granted
    functions = {f for f, _, _ in recorder.uses}
    assert {"api", "turn", "publish", "push"} <= functions, functions
    assert any(pk and pk.startswith("FANOUT#") for f, _, pk in recorder.uses if f == "push"), "a fan-out in steps"
    assert refused(recorder.uses) == []


def test_every_table_call_of_a_connection_is_within_its_functions_role(
    local_runtime: LocalRuntime, recorder: Recorder
) -> None:
    from consent import connect, disconnect
    from test_connections import answer, open_interaction, resumed, until_connection

    base, support = local_runtime.base_url, local_runtime.agent_url("support")
    disconnect(base, ALICE)
    provider = local_runtime.payments
    provider.token_seconds = 1  # the turn refreshes the token it uses: a conditional write of its CONN# item
    try:
        # When alice's turn asks for payments, she connects in a browser (a CSTATE# consent, a CONN# connection), the
        # turn uses and refreshes the token, and she lists and revokes it
        task = until_connection(support)
        connect(open_interaction(task)["detail"]["authorizationUrl"])
        done = answer(resumed(support, task), True, url=support)
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
        assert httpx.get(f"{base}/v1/a2a/connections", headers={"Authorization": f"Bearer {ALICE}"}).status_code == 200
        disconnect(base, ALICE)
    finally:
        provider.token_seconds = 3600
    # Then the api and the turn made the connection calls, and every one is granted
    touched = {(f, action, (pk or "").split("#")[0]) for f, action, pk in recorder.uses}
    assert {("api", "dynamodb:PutItem", "CSTATE"), ("api", "dynamodb:DeleteItem", "CSTATE"),
            ("api", "dynamodb:PutItem", "CONN"), ("api", "dynamodb:Query", "CONN"), ("api", "dynamodb:DeleteItem", "CONN"),
            ("turn", "dynamodb:GetItem", "CONN"), ("turn", "dynamodb:PutItem", "CONN")} <= touched, touched  # fmt: skip
    assert refused(recorder.uses) == []
