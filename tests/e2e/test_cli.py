"""The `nylorun` command line, run as a user runs it: a subprocess against the local Runtime, its answers
typed on stdin, and what it prints checked as a person (or a script reading --json) would read it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from conftest import ALICE, rpc
from consent import connect, disconnect
from nylorun.engine import Agent, Skill, Turn
from nylorun_examples.support import REFUNDS
from nylorun_local.runtime import LocalRuntime
from standardwebhooks import Webhook

pytestmark = pytest.mark.e2e
INTERACTIONS = "https://docs.nylorun.com/a2a/interactions/v1"

SHA256 = re.compile(r"sha256 [0-9a-f]{64}")


def nylorun(
    *args: str, stdin: str = "", token: str | None = ALICE, connect_when_asked: bool = False
) -> subprocess.CompletedProcess[str]:
    """`python -m nylorun_client.command ARGS` with NYLORUN_TOKEN set, stdin fed, and output captured (as from a pipe).
    `connect_when_asked`: when it prints a connection's link, a browser opens it and consents
    (docs/writing/connections.md)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NYLORUN_TOKEN", "COLUMNS")}
    env["PYTHONIOENCODING"] = "utf-8"
    if token is not None:
        env["NYLORUN_TOKEN"] = token
    if connect_when_asked:
        return _connecting([sys.executable, "-m", "nylorun_client.command", *args], stdin, env)
    return subprocess.run(
        [sys.executable, "-m", "nylorun_client.command", *args],
        input=stdin,
        check=False,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=90,
    )


START_URL = re.compile(r"http://\S+/v1/a2a/connections/start\?task=[0-9a-f-]{36}&interaction=ia-[0-9a-f]{16}")


def _connecting(command: list[str], stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, encoding="utf-8", env=env)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    process.stdin.write(stdin)
    process.stdin.close()
    out: dict[str, list[str]] = {"stdout": [], "stderr": []}
    readers = [threading.Thread(target=lambda n=n, f=f: out[n].extend(iter(f.readline, "")), daemon=True)
               for n, f in (("stdout", process.stdout), ("stderr", process.stderr))]
    for reader in readers:
        reader.start()
    deadline, connected = time.monotonic() + 60, False
    while process.poll() is None and time.monotonic() < deadline:
        found = START_URL.search("".join(out["stdout"] + out["stderr"]))
        if found and not connected:
            connect(found[0])
            connected = True
        time.sleep(0.05)
    process.wait(timeout=90)
    for reader in readers:
        reader.join(timeout=5)
    return subprocess.CompletedProcess(command, process.returncode, "".join(out["stdout"]), "".join(out["stderr"]))


def json_lines(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """--json promises that every stdout line is one JSON object."""
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture()
def support(local_runtime: LocalRuntime) -> str:
    disconnect(local_runtime.base_url, ALICE)  # connections outlive tasks: each test's person starts without one
    return local_runtime.agent_url("support")


class SimulatedCrash(BaseException):
    """The process dies (a BaseException, like a killed runtime: not an agent error the engine catches)."""


@pytest.fixture(scope="module")
def crashing(local_runtime: LocalRuntime) -> str:
    """An agent whose process dies in the middle of an effect, so the effect's outcome is lost."""
    agent = Agent(
        name="t-cli-crash",
        description="dies in the middle of an effect",
        skills=[Skill(id="charge", name="Charge", description="Charges and dies.", tags=["test"])],
    )

    @agent.turn
    def run(turn: Turn) -> None:
        turn.plan("Charge the card")
        turn.mark(0, "active")

        def charge(key: str) -> dict[str, Any]:
            raise SimulatedCrash()

        turn.effect("charge", charge)
        turn.reply("charged")

    local_runtime.add_agent(agent)
    return local_runtime.agent_url("t-cli-crash")


# ---------------------------------------------------------------------------------------------- send
def test_send_walks_a_person_through_question_connection_and_approval(support: str) -> None:
    # Given the support agent and a person who answers each prompt on stdin
    refunds_before = len(REFUNDS)
    # When they ask for a refund, answer the order, connect payments in a browser, and approve
    result = nylorun("send", support, "I want a refund", stdin="A-1001\ny\n", connect_when_asked=True)
    out = result.stdout
    # Then it ends COMPLETED, without an error
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "COMPLETED" in out
    # And each interaction was shown with its prompt (and the approval with its detail)
    assert "Question: Which order should I refund? (for example A-1001)" in out
    assert "Connection needed: payments: Connect your payments account" in out
    assert "Open this link in your browser to connect" in out and START_URL.search(out)
    assert "Approval needed: Refund 249.00 EUR for order A-1001 (Espresso machine)?" in out
    assert "orderId: A-1001" in out
    # And the order was drawn as a key-value panel (a component) before the approval was asked
    approval = out.index("Approval needed:")
    assert "╭─ Order A-1001" in out[:approval] and re.search(r"│ Item +Espresso machine", out[:approval])
    # And the plan was shown as it moved, ending with every step done
    assert "1/5 steps" in out and "5/5 steps" in out
    assert "✓ Find the order  (Espresso machine, 249.00 EUR)" in out
    assert "✓ Send the receipt" in out
    # And the end shows the reply, the receipt with its files/v1 version and sha256, and the telemetry
    assert "Reply: Refunded 249.00 EUR for order A-1001" in out
    # And the refund as a timeline, with a mark for each step's state
    assert re.search(r"✓ Refund issued  \(R-\d{5}\)", out) and "○ Money back on your account" in out
    assert "receipt v1" in out and SHA256.search(out)
    assert re.search(r"Telemetry: \d+ steps? · 470 tokens · \$0\.0016 · trace 1-", out)
    assert len(REFUNDS) == refunds_before + 1


def test_send_json_is_one_object_per_update_with_answers_from_stdin(support: str) -> None:
    # Given a script that answers with one stdin line per interaction
    # When it sends with --json
    result = nylorun("send", support, "I want a refund", "--json", stdin="A-1002\ny\n", connect_when_asked=True)
    assert result.returncode == 0, result.stderr
    # Then every stdout line is a JSON task update, all of the same task
    updates = json_lines(result)
    assert len(updates) >= 4
    assert {u["type"] for u in updates} == {"task"}
    assert len({u["taskId"] for u in updates}) == 1
    # And it saw the question, the connection and the approval, in that order
    kinds: list[str] = []
    for update in updates:
        if update["interaction"] and update["interaction"]["kind"] not in kinds:
            kinds.append(update["interaction"]["kind"])
    assert kinds == ["question", "connection", "approval"]
    assert any(u["state"] == "TASK_STATE_WORKING" and u["plan"] for u in updates)
    # And the last update is COMPLETED, with telemetry, the plan done and the file version of the receipt
    last = updates[-1]
    assert last["state"] == "TASK_STATE_COMPLETED"
    assert last["text"].startswith("Refunded 89.50 EUR for order A-1002")
    assert last["telemetry"]["tokens"] == 470 and last["telemetry"]["traceId"].startswith("1-")
    assert [step["state"] for step in last["plan"]] == ["done"] * 5
    receipt = last["artifacts"][0]["file"]
    assert (
        receipt["kind"] == "receipt"
        and receipt["version"] == 1
        and re.fullmatch(r"[0-9a-f]{64}", receipt["sha256"])
    )
    assert receipt["path"] == "receipts/A-1002.txt"


def test_send_denied_approval_makes_no_refund(support: str) -> None:
    # Given a person who connects payments but then says no to the refund
    refunds_before = len(REFUNDS)
    # When they answer "n" to the approval
    result = nylorun("send", support, "I want a refund", stdin="A-1001\nn\n", connect_when_asked=True)
    # Then the task completes with a reply saying no refund was made, and none was
    assert result.returncode == 0, result.stderr
    assert "Approve? [y/n]: n" in result.stdout
    assert "Reply: Understood: no refund was made." in result.stdout
    assert "✗ Approve the refund  (Declined)" in result.stdout
    assert len(REFUNDS) == refunds_before


def test_core_tier_shows_the_question_and_the_connection_as_text_only(support: str) -> None:
    # Given a caller that activates no profile extension (as a plain A2A client would see the Runtime)
    # When it sends and answers the question in text
    result = nylorun("send", support, "I want a refund", "--core", stdin="A-1001\n")
    out = result.stdout
    # Then the question arrived as text and text answered it, but the connection is text only and the CLI
    # says it cannot be answered that way: the task is left waiting (exit 3), with no plan shown
    assert "Which order should I refund?" in out
    assert "Connection needed (payments): Connect your payments account" in out
    assert "text only" in out and "never approves" in out
    assert "still waits (AUTH_REQUIRED)" in out
    assert "Plan" not in out
    assert result.returncode == 3


def test_an_effect_whose_outcome_was_lost_is_shown_and_ends_the_watch(crashing: str) -> None:
    # Given an agent whose process dies in the middle of an effect (effects/v1: the task stays WORKING)
    # When a person sends it a message
    result = nylorun("send", crashing, "charge me")
    # Then the CLI shows which effect's outcome was lost and what to do, and stops following (exit 3)
    assert re.search(r"⚠ The outcome of effect eff-\S+ was lost", result.stdout), result.stdout
    assert "stays WORKING" in result.stdout and "nylorun cancel" in result.stdout
    assert "WORKING" in result.stdout and "▶ Charge the card" in result.stdout
    assert result.returncode == 3


# ---------------------------------------------------------------------------------------------- task commands
def test_get_answer_approve_deny_tasks_and_cancel(support: str) -> None:
    # Given a task left waiting for its question (stdin closed at once: --json says so with exit 3)
    started = nylorun("send", support, "I want a refund", "--json", "--context", f"cli-{uuid.uuid4()}")
    assert started.returncode == 3, started.stderr
    waiting = json_lines(started)[-1]
    task, context = waiting["taskId"], waiting["contextId"]
    assert waiting["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "still waits (INPUT_REQUIRED)" in started.stderr

    # When `get` shows it: the state and the open question
    got = nylorun("get", support, task)
    assert got.returncode == 0, got.stderr
    assert "INPUT_REQUIRED" in got.stdout and "Question: Which order should I refund?" in got.stdout

    # When `answer` gives the order: the next interaction, the payments connection, is shown
    answered = nylorun("answer", support, task, "A-1001")
    assert answered.returncode == 0, answered.stderr
    assert "AUTH_REQUIRED" in answered.stdout and "Connection needed: payments" in answered.stdout

    # When `approve` says it is connected without connecting: refused, saying where to connect
    refused = nylorun("approve", support, task)
    assert refused.returncode != 0 and "/v1/a2a/connections/start" in refused.stderr, refused.stderr
    # When the person connects in a browser: the approval is shown
    found = rpc(support, "GetTask", {"id": task}, headers={"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}",
                                                          "A2A-Extensions": INTERACTIONS})
    connect(found["result"]["status"]["message"]["metadata"][INTERACTIONS]["detail"]["authorizationUrl"])
    connected = nylorun("get", support, task)
    for _ in range(100):
        if "Approval needed" in connected.stdout:
            break
        time.sleep(0.1)
        connected = nylorun("get", support, task)
    assert "Approval needed: Refund 249.00 EUR for order A-1001" in connected.stdout

    # When `approve --deny` declines it: the task completes without a refund
    denied = nylorun("approve", support, task, "--deny")
    assert denied.returncode == 0, denied.stderr
    assert "COMPLETED" in denied.stdout and "Reply: Understood: no refund was made." in denied.stdout

    # Then `tasks`, filtered by its context and state, lists it with its state and reply
    listed = nylorun("tasks", support, "--context", context, "--state", "completed")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if task in line)
    assert "COMPLETED" in row and "no refund was made" in row
    assert len([line for line in listed.stdout.splitlines() if line.strip()]) == 2  # the header and its row

    # And `send --no-wait` returns at once, and `cancel` ends that task
    sent = nylorun("send", support, "I want a refund", "--no-wait", "--json")
    assert sent.returncode == 0, sent.stderr
    other = json_lines(sent)[-1]["taskId"]
    canceled = nylorun("cancel", support, other)
    assert canceled.returncode == 0, canceled.stderr
    assert "CANCELED" in canceled.stdout


def test_errors_are_one_clear_line_and_a_non_zero_exit(support: str) -> None:
    # When asking for a task that does not exist
    unknown = nylorun("get", support, "no-such-task")
    # Then one line names the A2A error, nothing on stdout, no traceback, exit non-zero
    assert unknown.returncode != 0
    assert unknown.stdout == ""
    assert unknown.stderr.splitlines() == ["TaskNotFoundError: Task no-such-task not found (TASK_NOT_FOUND)"]
    # When no token is given at all
    anonymous = nylorun("tasks", support, token=None)
    # Then it says the Runtime refused, and how to give one
    assert anonymous.returncode != 0
    lines = anonymous.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("HTTPError: 401") and "NYLORUN_TOKEN" in lines[0]


# ---------------------------------------------------------------------------------------------- webhooks
def test_webhook_receiver_verifies_signatures_and_rejects_a_tampered_body(
    local_runtime: LocalRuntime,
) -> None:
    secret = local_runtime.options.push_secret
    assert secret
    # Given `nylorun webhooks` on a free port with a secret in its environment (never on its command line)
    receiver = subprocess.Popen(
        [sys.executable, "-m", "nylorun_client.command", "webhooks", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env={**os.environ, "PYTHONIOENCODING": "utf-8", "NYLORUN_PUSH_SECRET": secret},
    )
    try:
        assert receiver.stdout is not None
        listening = receiver.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", listening)
        assert found, listening
        url = f"http://127.0.0.1:{found.group(1)}/hooks"
        update = {"taskId": "task-cli-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_COMPLETED"}}
        body = json.dumps({"statusUpdate": update})
        now = datetime.now(UTC)
        headers = {
            "webhook-id": "msg_cli_1",
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": Webhook(secret).sign("msg_cli_1", now, body),
            "content-type": "application/json",
        }
        # When a delivery signed with the secret arrives
        good = httpx.post(url, content=body, headers=headers, timeout=10)
        # And then the same signature over a tampered body
        tampered = httpx.post(url, content=body.replace("COMPLETED", "FAILED"), headers=headers, timeout=10)
        # Then the first is accepted and the second refused
        assert 200 <= good.status_code < 300
        assert tampered.status_code == 401
    finally:
        receiver.terminate()
        out, err = receiver.communicate(timeout=10)
    # And the output shows the verified delivery and says clearly that the tampered one failed
    assert "✓ delivery msg_cli_1 verified: statusUpdate task-cli-1 TASK_STATE_COMPLETED" in out
    assert "✗ SIGNATURE FAILED for delivery msg_cli_1: No matching signature found (answered 401)" in out
    assert "Traceback" not in err
    assert out.count("TASK_STATE_FAILED") == 0  # the tampered body is never printed as if it were real


# ---------------------------------------------------------------------------------------------- connections
def test_connections_list_and_revoke(support: str, local_runtime: LocalRuntime) -> None:
    # Given alice connected payments for support (a walk to the approval, then declined)
    done = nylorun("send", support, "Refund order A-1002", stdin="n\n", connect_when_asked=True)
    assert done.returncode == 0, done.stderr
    # When she lists her connections: support's payments, with its scope, no token
    listed = nylorun("connections", "list", local_runtime.base_url)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^support  payments  \[refunds\]  connected ", listed.stdout, re.MULTILINE), listed.stdout
    # When she revokes it: gone from the list, and bob cannot revoke what is not his
    assert nylorun("connections", "revoke", support, "support", "payments", token="tok-bob").returncode == 1
    revoked = nylorun("connections", "revoke", support, "support", "payments")
    assert revoked.returncode == 0 and "Revoked payments" in revoked.stdout, revoked.stderr
    assert nylorun("connections", "list", local_runtime.base_url).stdout.strip() == "No connections."
