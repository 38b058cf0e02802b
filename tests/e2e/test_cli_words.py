"""`nylorun` in words at the human edges: each failure is one line with the server's own words and a non-zero exit,
a card URL works where an Agent URL does, ^C at a prompt cancels it and says the task still waits, `admin --local`
finds its default port, and `send --push` registers a webhook. Run as a user runs them, against the local Runtime."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import hostile_agent
import pytest
from conftest import ALICE, rpc, user_message
from nylorun_local.runtime import LocalRuntime, state_file
from terminal import run_in_pty
from test_cli import nylorun
from webhook_receiver import Receiver, own_secrets

pytestmark = pytest.mark.e2e


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_an_unknown_agent_is_named_in_the_servers_words(local_runtime: LocalRuntime) -> None:
    # When a caller names an Agent the Runtime does not serve
    result = nylorun("get", local_runtime.agent_url("nosuch"), "any-task")
    # Then one line says what the server said, and the exit code says it failed
    assert result.returncode == 1
    assert one_line(result.stderr).endswith(": No agent named 'nosuch' is served here")


def test_a_wrong_token_is_said_to_be_refused(local_runtime: LocalRuntime) -> None:
    # When a caller gives a token the Runtime does not know
    result = nylorun("get", local_runtime.agent_url("echo"), "any-task", "--token", "tok-nobody")
    # Then one line says that token was refused (not "give a bearer token": one was given)
    assert result.returncode == 1
    line = one_line(result.stderr)
    assert "401" in line and "Unknown bearer token" in line and "this token was refused" in line


def test_an_unknown_task_is_named_with_its_reason(local_runtime: LocalRuntime) -> None:
    # When a caller asks for a task that does not exist
    result = nylorun("get", local_runtime.agent_url("echo"), "no-such-task")
    # Then one line gives the A2A error, the server's message and the ErrorInfo reason
    assert result.returncode == 1
    assert one_line(result.stderr) == "TaskNotFoundError: Task no-such-task not found (TASK_NOT_FOUND)"


@pytest.mark.parametrize("tail", ["/.well-known/agent-card.json", "/.well-known/agent-card.json/"])
def test_a_card_url_as_the_serve_banner_prints_it_reaches_the_agent(local_runtime: LocalRuntime, tail: str) -> None:
    # Given a task of the echo Agent, and its card URL as `nylorun serve` prints it (with or without a slash)
    url = local_runtime.agent_url("echo")
    task = rpc(url, "SendMessage", {"message": user_message("hello card")})["result"]["task"]
    # When the caller pastes the card URL into `nylorun get`
    result = nylorun("get", url + tail, task["id"])
    # Then it shows the task
    assert result.returncode == 0, result.stderr
    assert "hello card" in result.stdout


def test_ctrl_c_at_the_approval_prompt_ends_it_and_the_task_still_waits(local_runtime: LocalRuntime) -> None:
    # Given an Agent that asks for an approval
    local_runtime.add_agent(hostile_agent.agent)
    url = local_runtime.agent_url("t-hostile")
    env = {**os.environ, "TERM": "xterm-256color", "NYLORUN_TOKEN": ALICE, "PYTHONIOENCODING": "utf-8"}
    # When the person presses ^C at the y/n prompt
    argv = [sys.executable, "-m", "nylorun_client.command", "send", url, "ask please"]
    # A long deadline only guards against a hang: a loaded machine may take many seconds to reach the prompt
    code, seen = run_in_pty(argv, env, typed=[("[y/n]", b"\x03")], timeout=180)
    # Then the prompt ends, the command says the task still waits and how to answer it later, and exits 130
    assert code == 130, seen
    assert "still waits" in seen and f"nylorun approve {url}" in seen
    assert "Traceback" not in seen
    # And the task indeed still waits for the approval
    (task,) = [t for t in rpc(url, "ListTasks", {})["result"]["tasks"] if t["id"] in seen]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"


@pytest.fixture()
def default_port_runtime(local_runtime: LocalRuntime) -> Iterator[None]:
    """The session's local Runtime, found where `nylorun admin --local` looks by default (port 8080's state file in
    the tests' own state folder)."""
    default, path = state_file(8080), state_file(local_runtime.options.port)
    kept = default.read_bytes() if default.exists() else None
    shutil.copyfile(path, default)
    yield
    if kept is None:
        default.unlink()
    else:
        Path(default).write_bytes(kept)


def test_admin_local_without_a_port_runs_the_command(default_port_runtime: None) -> None:
    # When the operator runs `nylorun admin --local dlq`, as docs/operate.md#list-them shows
    result = nylorun("admin", "--local", "dlq", token=None)
    # Then the command runs on the default port's Runtime and lists the dead-letter queues
    assert result.returncode == 0, result.stderr
    assert "ContextDLQ" in result.stdout and "PushDLQ" in result.stdout


def test_send_push_registers_a_webhook_that_gets_the_deliveries(local_runtime: LocalRuntime) -> None:
    # Given a receiver verifying with the caller's own keys
    receiver = Receiver(own_secrets(local_runtime.base_url, ALICE))
    try:
        # When the caller sends with --push
        result = nylorun("send", local_runtime.agent_url("echo"), "push this", "--push", receiver.url)
        # Then the task completes, the command says where the deliveries go and how to verify them
        assert result.returncode == 0, result.stderr
        assert receiver.url in result.stderr and "nylorun webhooks --from" in result.stderr
        # And the receiver gets the task's completion, signed
        requests = receiver.wait(2, timeout=30)
        states = [r["body"].get("statusUpdate", {}).get("status", {}).get("state") for r in requests]
        assert "TASK_STATE_COMPLETED" in states and all(r["verified"] for r in requests)
    finally:
        receiver.close()
