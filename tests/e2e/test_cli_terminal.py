"""What an Agent or a caller writes never drives the terminal of the person reading `nylorun`: `send`, `get`,
`tasks`, `webhooks` and `nylorun admin show`/`dlq` run under a pseudo-terminal against the local Runtime, with the
red team's escape sequences (hostile_agent.HOSTILE) in a reply, a plan, a prompt, a component, an artifact and a
contextId. The words stay; no sequence, no payload reaches the terminal. `--json` keeps the data exact."""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
import uuid
from typing import Any

import hostile_agent
import pytest
from conftest import ALICE, poll, rpc, user_message
from hostile_agent import HOSTILE, VISIBLE, forbidden
from nylorun_local.aws import free_port
from nylorun_local.runtime import LocalRuntime
from terminal import run_in_pty

pytestmark = pytest.mark.e2e

NYLORUN = [sys.executable, "-m", "nylorun_client.command"]


def terminal_env() -> dict[str, str]:
    """A person's terminal: a colour xterm, 120 columns, with their token."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return {**env, "TERM": "xterm-256color", "COLUMNS": "120", "NYLORUN_TOKEN": ALICE, "PYTHONIOENCODING": "utf-8"}


@pytest.fixture(scope="module")
def hostile(local_runtime: LocalRuntime) -> str:
    local_runtime.add_agent(hostile_agent.agent)
    return local_runtime.agent_url("t-hostile")


def hostile_task(url: str, **configuration: Any) -> dict[str, Any]:
    """A completed task of the hostile Agent, in a context whose id carries the sequences too."""
    message = user_message("hello", contextId=f"ctx-{uuid.uuid4()}{HOSTILE}")
    params: dict[str, Any] = {"message": message, **({"configuration": configuration} if configuration else {})}
    task = rpc(url, "SendMessage", params)["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return dict(task)


def test_send_shows_the_agents_words_and_no_escape_sequence(hostile: str) -> None:
    # Given an Agent whose plan, prompt, component, artifact and reply all carry escape sequences
    # When a person sends to it in a terminal and approves at the prompt
    code, seen = run_in_pty([*NYLORUN, "send", hostile, "ask please"], terminal_env(), typed=[("[y/n]", b"y\n")])
    # Then the task completes and every word is there
    assert code == 0, seen
    for words in (*VISIBLE, "Approve prompt"):
        assert words in seen, words
    # And no sequence, control byte or payload reached the terminal
    assert forbidden(seen) == []


def test_get_tasks_and_send_no_wait_show_no_escape_sequence(hostile: str) -> None:
    # Given a task of that Agent in a context whose id carries the sequences
    task = hostile_task(hostile)
    # When a person shows it, lists their tasks, and sends into that context without waiting
    _, shown = run_in_pty([*NYLORUN, "get", hostile, task["id"]], terminal_env())
    _, listed = run_in_pty([*NYLORUN, "tasks", hostile], terminal_env())
    _, sent = run_in_pty(
        [*NYLORUN, "send", hostile, "again", "--context", task["contextId"], "--no-wait"], terminal_env()
    )
    # Then each shows its words
    assert all(words in shown for words in ("reply text", "table cell", "artifact text", "Plan step", "plan note"))
    assert "reply text" in listed and task["id"] in listed
    assert "in context ctx-" in sent
    # And none lets a sequence, a control byte or a payload through
    assert forbidden(shown) == [] and forbidden(listed) == [] and forbidden(sent) == []


def test_json_keeps_the_text_exact_with_every_control_escaped(hostile: str) -> None:
    # Given a task of that Agent
    task = hostile_task(hostile)
    # When a script reads it with --json in a terminal
    code, seen = run_in_pty([*NYLORUN, "get", hostile, task["id"], "--json"], terminal_env())
    # Then no raw control character reached the terminal (C0 but the line ends, DEL, C1)
    assert code == 0, seen
    assert re.findall(r"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f]", seen) == []
    # And the JSON holds the Agent's text exactly, sequences included
    (line,) = [line for line in seen.splitlines() if line.startswith("{")]
    assert json.loads(line)["text"] == f"reply text {HOSTILE}"


def test_webhooks_json_shows_a_delivery_with_no_raw_control(hostile: str) -> None:
    # Given a receiver in a terminal, verifying with the caller's own keys
    port = free_port()

    def push_when_listening() -> None:  # the receiver runs in the foreground: the push comes from beside it
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                hostile_task(hostile, taskPushNotificationConfig={"url": f"http://127.0.0.1:{port}/"})
                return
            except AssertionError:
                time.sleep(0.2)

    pusher = threading.Timer(3, push_when_listening)
    pusher.start()
    # When a task of the hostile Agent pushes its updates to it (^C once the completed one arrived)
    argv = [*NYLORUN, "webhooks", "--from", hostile, "--port", str(port), "--json"]
    code, seen = run_in_pty(argv, terminal_env(), typed=[('"TASK_STATE_COMPLETED"', b"\x03")], timeout=60)
    pusher.join()
    # Then the delivery was verified and shown, with no raw control character
    assert code == 0, seen
    assert '"verified": true' in seen and "reply text" in seen
    assert re.findall(r"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f]", seen.replace("^C", "")) == []


def test_admin_show_and_dlq_show_a_callers_context_id_without_its_sequences(hostile: str, local_runtime: LocalRuntime) -> None:
    # Given a task whose caller chose a context id full of escape sequences, with a push config nobody answers
    task = hostile_task(hostile, taskPushNotificationConfig={"url": f"http://127.0.0.1:{free_port()}/"})
    admin = [*NYLORUN, "admin", "--local", str(local_runtime.options.port)]
    env = terminal_env()
    # When the operator shows the task
    code, shown = run_in_pty([*admin, "show", task["id"]], env)
    # Then it shows the task and its context, and no sequence reaches the terminal
    assert code == 0, shown
    assert task["id"] in shown and "ctx-" in shown
    assert forbidden(shown) == []

    # When its deliveries are dead-lettered (the retry window shrunk to 6 s) and the operator lists the dead letters
    def listed() -> str:
        return run_in_pty([*admin, "dlq", "--queue", "push"], env)[1]

    seen = poll(listed, lambda out: task["id"] in out and "ctx-" in out, timeout=60, every=1)
    # Then the dead letter is listed with its task's context, and no sequence reaches the terminal
    assert task["id"] in seen and "ctx-" in seen, seen
    assert forbidden(seen) == []
