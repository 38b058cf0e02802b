"""End to end: @a2a-js/sdk 1.3.0, the TypeScript SDK, under node, as a JavaScript caller uses it.

`js/peer.mjs` makes the calls with the SDK's public client API (ClientFactory, the Client's methods, its
error classes) over real HTTP to the `local_runtime` fixture and prints one JSON line per check; each test
here runs one of its scenarios and asserts what the caller saw.

It needs node >= 20 (the SDK's `engines`) and npm. On a machine without node the fixture installs Debian's
`nodejs` and `npm` with apt-get (as root, or with passwordless sudo); when node still cannot be had, or is
too old, the tests fail saying so: a skip would hide that this caller was never tried. The SDK comes from
`js/package-lock.json` (`npm ci`, only when node_modules is missing or was installed from another lock).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import ALICE, rpc
from consent import connect, disconnect
from nylorun_local.runtime import LocalRuntime
from webhook_receiver import Receiver, own_secrets

# The timeout covers the fixture's setup too: apt-get and npm ci on a fresh machine take minutes.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

JS_DIR = Path(__file__).parent / "js"
LOCK = JS_DIR / "package-lock.json"
# Written after a successful `npm ci`: the hash of the lock node_modules was installed from.
STAMP = JS_DIR / "node_modules" / ".installed-lock-sha256"
MIN_NODE = 20

INTERACTIONS = "https://docs.nylorun.com/a2a/interactions/v1"
TELEMETRY = "https://docs.nylorun.com/a2a/telemetry/v1"
COMPLETED = "TASK_STATE_COMPLETED"
AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

Checks = dict[str, dict[str, Any]]


# ---------------------------------------------------------------------------------------------- node + SDK
def apt_install_nodejs() -> str:
    """Debian's nodejs and npm, for a fresh CI machine. Returns why it could not, or ''."""
    apt = shutil.which("apt-get")
    if apt is None:
        return "apt-get is not available"
    if os.geteuid() == 0:
        prefix: list[str] = []
    elif shutil.which("sudo"):
        prefix = ["sudo", "-n"]
    else:
        return "apt-get needs root (or passwordless sudo)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in (["update", "-q"], ["install", "-y", "-q", "--no-install-recommends", "nodejs", "npm"]):
        done = subprocess.run(
            [*prefix, apt, *step], check=False, capture_output=True, text=True, env=env, timeout=540
        )
        if done.returncode != 0:
            return f"apt-get {step[0]} exited {done.returncode}: {done.stderr.strip()[-1500:]}"
    return ""


def find_node() -> tuple[str, str]:
    """Paths of node (>= MIN_NODE) and npm, installing them if missing; fails the test otherwise."""
    if not (shutil.which("node") and shutil.which("npm")):
        why = apt_install_nodejs()
        if why:
            pytest.fail(
                f"node and npm are needed for the @a2a-js/sdk tests and could not be installed: {why}"
            )
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(
            f"node and npm are needed for the @a2a-js/sdk tests; after apt-get: node={node} npm={npm}"
        )
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < MIN_NODE:
        pytest.fail(
            f"{node} is node {version}; @a2a-js/sdk 1.3.0 needs node >= {MIN_NODE} (Debian 12's nodejs is 18):"
            " put node 20 or newer on the machine (Debian 13's nodejs, or NodeSource's)"
        )
    return node, npm


def install_sdk(npm: str) -> None:
    """`npm ci` from the committed lock, unless node_modules already came from this very lock."""
    wanted = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    if STAMP.is_file() and STAMP.read_text() == wanted:
        return
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"],
        check=False,
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"npm ci in {JS_DIR} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    STAMP.write_text(wanted)


@dataclass(frozen=True)
class Peer:
    node: str

    def run(self, scenario: str, token: str = ALICE, **args: str) -> Checks:
        """Runs one scenario of peer.mjs; returns its lines by check name."""
        done = subprocess.run(
            [self.node, "peer.mjs", scenario, json.dumps(args)],
            check=False,
            cwd=JS_DIR,
            env={**os.environ, "A2A_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"node peer.mjs {scenario} exited {done.returncode}:\n{done.stderr}"
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        return {line["check"]: line for line in lines}


@pytest.fixture(scope="module")
def peer() -> Peer:
    node, npm = find_node()
    install_sdk(npm)
    return Peer(node)


@pytest.fixture()
def receiver(local_runtime: LocalRuntime) -> Iterator[Receiver]:
    made = Receiver(own_secrets(local_runtime.base_url, ALICE))
    yield made
    made.close()


def ok(checks: Checks, name: str) -> Any:
    """The result of a check that must have succeeded."""
    assert name in checks, f"no line for {name}: {checks}"
    assert "error" not in checks[name], f"{name} threw: {checks[name]['error']}"
    return checks[name]["result"]


def error(checks: Checks, name: str) -> dict[str, Any]:
    """What a check that must have thrown threw."""
    assert name in checks, f"no line for {name}: {checks}"
    assert "error" in checks[name], f"{name} did not throw: {checks[name]['result']}"
    return dict(checks[name]["error"])


def turn(role: str, text: str) -> dict[str, str]:
    return {"role": role, "text": text}


# ---------------------------------------------------------------------------------------------- 1. card
def test_card_resolution_from_the_agent_url(peer: Peer, local_runtime: LocalRuntime) -> None:
    url = local_runtime.agent_url("tck")
    # When the SDK's default resolver is given the Agent URL with its slash, the full card URL (with the
    # empty path the SDK documents for that), and the Agent URL without its slash
    checks = peer.run("card", agentUrl=url)

    # Then the first two resolve the tck card, with its one JSON-RPC 1.0 interface at the slash URL
    card = {
        "name": "tck",
        "interfaces": [{"url": f"{url}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "streaming": False,
        "pushNotifications": True,
        "clientProtocolVersion": "1.0",
    }
    assert ok(checks, "card-with-slash") == card
    assert ok(checks, "card-url") == card
    # And without the slash `.well-known/agent-card.json` resolves one level up (URL rules), where the
    # Runtime answers 404 (it cannot tell which Agent was meant): the SDK throws a plain Error naming it
    up_one = f"{local_runtime.base_url}/v1/a2a/agents/.well-known/agent-card.json"
    assert error(checks, "card-without-slash") == {
        "name": "Error",
        "message": f"Failed to fetch Agent Card from {up_one}: 404",
        "code": None,
        "a2a": False,
        "taskNotFound": False,
        "taskNotCancelable": False,
    }
    # And that 404 says where the cards are
    answer = httpx.get(up_one, timeout=30)
    assert answer.status_code == 404
    assert f"{url}/" in answer.json()["agents"]


# ---------------------------------------------------------------------------------------------- 2. SendMessage
def test_blocking_send_message_completes(peer: Peer, local_runtime: LocalRuntime) -> None:
    # When the complete-task scenario is sent (sendMessage blocks by default)
    task = ok(peer.run("send", agentUrl=local_runtime.agent_url("tck")), "send")
    # Then the answer is the completed task with the TCK greeting
    assert (task["kind"], task["state"], task["text"]) == ("task", COMPLETED, "Hello from TCK")
    assert task["history"] == [turn("ROLE_USER", "hi"), turn("ROLE_AGENT", "Hello from TCK")]


# ---------------------------------------------------------------------------------------------- 3. GetTask
def test_get_task_history_length(peer: Peer, local_runtime: LocalRuntime) -> None:
    # When a completed task is read with no historyLength, 1 and 0
    checks = peer.run("get", agentUrl=local_runtime.agent_url("tck"))
    full, last, none = (ok(checks, name) for name in ("get-full", "get-history-1", "get-history-0"))
    # Then it is the same task each time, with the whole history, the last message, and none
    assert {t["id"] for t in (full, last, none)} == {full["id"]}
    assert {t["state"] for t in (full, last, none)} == {COMPLETED}
    assert full["history"] == [turn("ROLE_USER", "hi"), turn("ROLE_AGENT", "Hello from TCK")]
    assert last["history"] == [turn("ROLE_AGENT", "Hello from TCK")]
    assert none["history"] == []


# ---------------------------------------------------------------------------------------------- 4. ListTasks
def test_list_tasks_by_context_with_the_client_defaults(peer: Peer, local_runtime: LocalRuntime) -> None:
    # Given two completed tasks in a new context; when the client lists it with only a contextId
    checks = peer.run("list", agentUrl=local_runtime.agent_url("tck"))
    created = ok(checks, "list-created")
    # Then what the SDK sent carries status "UNRECOGNIZED" for the status it was not given
    assert ok(checks, "list-sent") == {"contextId": created["contextId"], "status": "UNRECOGNIZED"}
    # And the Runtime read it as no filter: both tasks, newest status first, one page
    page = ok(checks, "list")
    assert page == {
        "ids": created["ids"][::-1],
        "states": [COMPLETED, COMPLETED],
        "totalSize": 2,
        "nextPageToken": "",
    }


# ---------------------------------------------------------------------------------------------- 5. CancelTask
def test_cancel_task_and_the_sdk_error_types(peer: Peer, local_runtime: LocalRuntime) -> None:
    checks = peer.run("cancel", agentUrl=local_runtime.agent_url("tck"))
    # Given a task waiting for input
    waiting = ok(checks, "cancel-waiting")
    assert waiting["state"] == "TASK_STATE_INPUT_REQUIRED"
    # When it is canceled, then it is canceled, and GetTask agrees
    canceled = ok(checks, "cancel")
    assert (canceled["id"], canceled["state"]) == (waiting["id"], "TASK_STATE_CANCELED")
    assert ok(checks, "cancel-get")["state"] == "TASK_STATE_CANCELED"
    # When it is canceled again, then the SDK throws its TaskNotCancelableError (-32002)
    again = error(checks, "cancel-again")
    assert (again["name"], again["taskNotCancelable"], again["a2a"], again["code"]) == (
        "TaskNotCancelableError",
        True,
        True,
        -32002,
    )
    # And GetTask of an unknown id throws its TaskNotFoundError (-32001)
    unknown = error(checks, "get-unknown")
    assert (unknown["name"], unknown["taskNotFound"], unknown["code"]) == ("TaskNotFoundError", True, -32001)


# ---------------------------------------------------------------------------------------------- 6. push
def test_push_configs_and_a_verified_delivery(
    peer: Peer, local_runtime: LocalRuntime, receiver: Receiver
) -> None:
    url = local_runtime.agent_url("tck")
    # Given a waiting task; when the client adds a push config to it, reads it, lists it, then answers
    checks = peer.run("push-setup", agentUrl=url, hook=receiver.url)
    created = ok(checks, "push-create")
    task_id = created["taskId"]
    # Then the config has an id and the Runtime does not send its secrets back
    assert created["id"]
    assert (created["url"], created["authentication"], created["token"]) == (
        receiver.url,
        {"scheme": "Bearer", "credentials": ""},
        "",
    )
    assert ok(checks, "push-get") == created
    assert ok(checks, "push-list") == {"configs": [created], "nextPageToken": ""}
    assert ok(checks, "push-continue")["state"] == COMPLETED

    # And the receiver gets the two status changes after it, each signed (Standard Webhooks, verified with
    # the Runtime's push secret) and carrying the config's credentials and token
    # (events travel through the table's stream: the INPUT_REQUIRED the config was created in may still be on
    # its way when the config lands, and then it is delivered too, before the rest)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and COMPLETED not in json.dumps(receiver.requests):
        time.sleep(0.05)
    deliveries = list(receiver.requests)
    states = [d["body"]["statusUpdate"]["status"]["state"] for d in deliveries]
    if states and states[0] == "TASK_STATE_INPUT_REQUIRED":
        states, deliveries = states[1:], deliveries[1:]
    assert states == ["TASK_STATE_WORKING", COMPLETED]
    assert all(d["verified"] for d in deliveries)
    assert {d["body"]["statusUpdate"]["taskId"] for d in deliveries} == {task_id}
    assert {d["headers"]["Authorization"] for d in deliveries} == {"Bearer js-hook-secret"}
    assert {d["headers"]["X-A2A-Notification-Token"] for d in deliveries} == {"js-token"}

    # When the config is deleted, then the list is empty and reading it throws TaskNotFoundError (-32001)
    after = peer.run("push-delete", agentUrl=url, taskId=task_id, id=created["id"])
    assert ok(after, "push-delete") is None
    assert ok(after, "push-list-after") == {"configs": [], "nextPageToken": ""}
    gone = error(after, "push-get-after")
    assert (gone["name"], gone["taskNotFound"], gone["code"]) == ("TaskNotFoundError", True, -32001)


# ---------------------------------------------------------------------------------------------- 7. support
def connect_when_asked(local_runtime: LocalRuntime, seconds: float = 60) -> None:
    """A browser: once alice's support task asks for the payments connection, open its link and consent."""
    url, headers = local_runtime.agent_url("support"), {"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}",
                                                         "A2A-Extensions": INTERACTIONS}
    deadline, since = time.monotonic() + seconds, datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    while time.monotonic() < deadline:
        query = {"status": "TASK_STATE_AUTH_REQUIRED", "pageSize": 5, "statusTimestampAfter": since}
        listed = rpc(url, "ListTasks", query, headers=headers)
        for task in listed.get("result", {}).get("tasks", []):
            asked = (task["status"].get("message", {}).get("metadata") or {}).get(INTERACTIONS, {})
            if asked.get("kind") == "connection":
                connect(asked["detail"]["authorizationUrl"])
                return
        time.sleep(0.1)


def test_support_conversation_with_a_typed_approval(peer: Peer, local_runtime: LocalRuntime) -> None:
    # When the client, with interactions/progress/telemetry activated (A2A-Extensions), asks for a refund,
    # names the order, confirms the connection (interactions/v1), says "yes" in text, then approves
    # through interactions/v1
    # (the person connects payments in a browser meanwhile: docs/writing/connections.md)
    disconnect(local_runtime.base_url, ALICE)
    browser = threading.Thread(target=connect_when_asked, args=(local_runtime,), daemon=True)
    browser.start()
    checks = peer.run("support", agentUrl=local_runtime.agent_url("support"))
    browser.join(timeout=5)
    steps = [ok(checks, name) for name in ("support-ask", "support-order", "support-connected")]
    text_yes, approved = ok(checks, "support-text-yes"), ok(checks, "support-approved")
    opened = [s["metadata"][INTERACTIONS] for s in steps]

    # Then it is one task throughout
    assert {s["id"] for s in [*steps, text_yes, approved]} == {steps[0]["id"]}
    # And it asked a question, then for the connection, then for the approval, each a typed interaction
    assert [s["state"] for s in steps] == ["TASK_STATE_INPUT_REQUIRED", AUTH_REQUIRED, AUTH_REQUIRED]
    assert [o["kind"] for o in opened] == ["question", "connection", "approval"]
    assert opened[2]["detail"] == {"orderId": "A-1001", "amount": 249, "currency": "EUR"}
    # And the text "yes" did not approve: the same approval is still open
    assert text_yes["state"] == AUTH_REQUIRED
    assert text_yes["metadata"][INTERACTIONS]["interactionId"] == opened[2]["interactionId"]
    # And the typed approval completed it: the reply, the receipt, and telemetry on the final status
    assert approved["state"] == COMPLETED
    # (then the refund timeline's text fallback: docs/components.md)
    assert re.match(r"Refunded 249\.00 EUR for order A-1001 \(R-\d{5}\)\.Refund R-\d{5}\n\[x\] Approved", approved["text"])
    assert [a["name"] for a in approved["artifacts"]] == ["A-1001.txt"]
    assert set(approved["metadata"][TELEMETRY]) >= {"steps", "tokens", "costUsd", "traceId"}
