"""`nylorun serve`'s logs for the person at the terminal: an Agent's error as a readable Python traceback on
stderr (the JSON log line stays as deployed), and each function's log lines under its own function name."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import A2A, nylorun_serve, user_message

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent


def call(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(url, json=body, headers=A2A, timeout=30)
    assert response.status_code == 200, response.text
    return dict(response.json()["result"])


@pytest.fixture(scope="module")
def failed_turn(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, list[dict[str, Any]]]:
    """A served Agent whose turn raised: (its task id, what serve printed on stderr, its JSON log lines)."""
    folder = tmp_path_factory.mktemp("serve")
    out, err = folder / "stdout", folder / "stderr"
    env = {**os.environ, "NYLORUN_AGENTS": "raising_agent:agent", "PYTHONPATH": str(HERE), "POWERTOOLS_LOG_LEVEL": "INFO"}
    with out.open("w") as stdout, err.open("w") as stderr, nylorun_serve(
        ["--auth", "none", "--no-push", "--no-examples"], "ledger/.well-known/agent-card.json",
        env=env, stdout=stdout, stderr=stderr,
    ) as base:  # fmt: skip
        url = f"{base}/ledger/"
        task = call(url, "SendMessage", {"message": user_message("EUR 25")})["task"]
        deadline = time.monotonic() + 30
        while task["status"]["state"] != "TASK_STATE_FAILED" and time.monotonic() < deadline:
            time.sleep(0.2)
            task = call(url, "GetTask", {"id": task["id"]})
        assert task["status"]["state"] == "TASK_STATE_FAILED", task
    lines = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    return task["id"], err.read_text(), lines


def test_an_agent_error_prints_a_readable_traceback_naming_the_agent_and_task(
    failed_turn: tuple[str, str, list[dict[str, Any]]],
) -> None:
    # Given a served Agent whose code raised in a turn
    task_id, stderr, _ = failed_turn
    # Then stderr shows it as Python prints a traceback, under a header with the Agent's name and the task id
    lines = stderr.splitlines()
    header = lines.index(f"Agent ledger raised in task {task_id}:")
    assert lines[header + 1] == "Traceback (most recent call last):", stderr
    trace = lines[header + 1 :]
    assert any(line.strip().startswith(f'File "{HERE / "raising_agent.py"}"') for line in trace), stderr
    assert "ValueError: the ledger is closed; cannot post EUR 25" in trace, stderr


def test_each_function_logs_under_its_own_name(failed_turn: tuple[str, str, list[dict[str, Any]]]) -> None:
    # Given the api took the message and the turn function ran the failing turn, in one local process
    task_id, _, lines = failed_turn
    # Then the turn's error line says it came from the turn function, in the deployed JSON shape
    (raised,) = [line for line in lines if line["message"] == "agent raised"]
    assert raised["function_name"] == "nylorun-local-TurnFunction", raised
    assert raised["task_id"] == task_id and raised["agent"] == "ledger"
    assert "ValueError: the ledger is closed" in raised["exception"]
    # And the api's line about the new turn says it came from the api function
    (submitted,) = [line for line in lines if line["message"] == "turn submitted" and line.get("task_id") == task_id]
    assert submitted["function_name"] == "nylorun-local-ApiFunction", submitted
