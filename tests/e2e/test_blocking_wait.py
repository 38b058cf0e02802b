"""The blocking wait (Profile v2: a blocking SendMessage waits up to the Runtime limit `a2aWaitMs`, then answers
with the task still WORKING), as deployed: the stack caps the wait below the HTTP API's 30 s integration limit.

Locally: an app over the running stack with a 1.5 s wait, and an Agent that blocks until the test lets it go.
Statically: the template's numbers fit together (wait < api function Timeout, wait + margin < 30 s).
"""

from __future__ import annotations

import copy
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import auth, rpc, user_message
from fastapi.testclient import TestClient
from nylorun.engine import Agent, Skill, Turn
from nylorun.settings import Settings
from nylorun.wiring import Runtime
from nylorun_local import template
from nylorun_local.runtime import LocalRuntime

pytestmark = pytest.mark.e2e

WAIT_MS = 1500
AGENT = "t-blocking"
# API Gateway HTTP APIs end an integration at 30 s, a hard limit (no quota raises it).
HTTP_API_LIMIT_S = 30
# What a blocking SendMessage needs beside the wait itself: a cold start's init, the last read, rendering.
MARGIN_S = 2


@dataclass
class Gate:
    started: threading.Event = field(default_factory=threading.Event)  # the agent is running
    release: threading.Event = field(default_factory=threading.Event)  # the test lets it finish


@pytest.fixture(scope="module")
def gate(local_runtime: LocalRuntime) -> Iterator[Gate]:
    """A slow Agent: says it started, then blocks until the test releases it (at most 60 s)."""
    gate = Gate()

    def run(turn: Turn) -> None:
        turn.say("thinking")
        gate.started.set()
        gate.release.wait(60)
        turn.reply("done at last")

    agent = Agent(
        name=AGENT, description="blocks until released", skills=[Skill(id="t", name="t", description="t", tags=["t"])]
    )
    agent.turn(run)
    local_runtime.add_agent(agent)
    yield gate
    gate.release.set()  # never leave a turn blocked behind the module


@pytest.fixture(scope="module")
def short_wait(local_runtime: LocalRuntime) -> Iterator[TestClient]:
    """The api app over the running stack (same table, state machine, agents) with a 1.5 s blocking wait."""
    running = local_runtime.runtime
    assert running is not None
    runtime = Runtime(settings=running.settings.model_copy(update={"a2a_wait_ms": WAIT_MS}), registry=running.registry)
    with TestClient(runtime.app()) as client:
        yield client


def call(client: TestClient, agent: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    response = client.post(f"/v1/a2a/agents/{agent}", json=body, headers=auth())
    assert response.status_code == 200, response.text
    answer = dict(response.json())
    assert "error" not in answer, answer
    return dict(answer["result"])


def test_a_turn_longer_than_the_wait_answers_working_then_completes(short_wait: TestClient, gate: Gate) -> None:
    # Given an Agent that will not finish until released
    # When a caller sends a blocking SendMessage to an api whose a2aWaitMs is 1.5 s
    before = time.monotonic()
    task = call(short_wait, AGENT, "SendMessage", {"message": user_message("take your time")})["task"]
    waited = time.monotonic() - before
    # Then the answer is the task as it is: still WORKING, while the agent is still blocked
    assert task["status"]["state"] == "TASK_STATE_WORKING", task["status"]
    assert gate.started.is_set() and not gate.release.is_set()
    assert waited >= WAIT_MS / 1000  # it did wait (a lower bound only: the state is what is asserted)

    # When the agent is released, and the caller polls GetTask
    gate.release.set()
    deadline, state = time.monotonic() + 30, ""
    while time.monotonic() < deadline:
        got = call(short_wait, AGENT, "GetTask", {"id": task["id"]})
        state = got["status"]["state"]
        if state == "TASK_STATE_COMPLETED":
            break
        time.sleep(0.1)
    # Then the same task completed with the agent's reply
    assert state == "TASK_STATE_COMPLETED"
    assert got["status"]["message"]["parts"] == [{"text": "done at last"}]


def test_a_turn_shorter_than_the_wait_answers_completed(local_runtime: LocalRuntime) -> None:
    # Given the session's api, whose blocking wait (20 s) is far longer than an echo turn even on two busy cores
    # (with 1.5 s, seen answering WORKING when other tests ran beside it)
    wait_seconds = (local_runtime.options.a2a_wait_ms or 0) / 1000
    assert wait_seconds >= 10
    # When a blocking SendMessage goes to echo, which ends at once
    before = time.monotonic()
    task = rpc(local_runtime.agent_url("echo"), "SendMessage", {"message": user_message("quick")})["result"]["task"]
    # Then the wait ends with the turn: COMPLETED, not WORKING, before the wait is up
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert time.monotonic() - before < wait_seconds


# ---------------------------------------------------------------- the deployed numbers fit together
def wait_problems(tpl: dict[str, Any]) -> list[str]:
    """A2aWaitMs is capped below the HTTP API limit with margin, and the api function outlives the longest wait."""
    problems = []
    param = tpl["Parameters"]["A2aWaitMs"]
    max_s = float(param.get("MaxValue", float("inf"))) / 1000
    if float(param.get("Default", 0)) / 1000 > max_s:
        problems.append(f"A2aWaitMs Default {param.get('Default')} exceeds its MaxValue")
    if max_s + MARGIN_S > HTTP_API_LIMIT_S:
        problems.append(f"A2aWaitMs MaxValue {max_s:g} s + {MARGIN_S} s margin exceeds the HTTP API's {HTTP_API_LIMIT_S} s")
    api = tpl["Resources"]["ApiFunction"]["Properties"]
    timeout = float(api.get("Timeout", tpl.get("Globals", {}).get("Function", {}).get("Timeout", 3)))
    if timeout < max_s + MARGIN_S:
        problems.append(f"ApiFunction Timeout {timeout:g} s is not above the longest wait {max_s:g} s + {MARGIN_S} s")
    if api.get("Environment", {}).get("Variables", {}).get("NYLORUN_A2A_WAIT_MS") != {"Ref": "A2aWaitMs"}:
        problems.append("ApiFunction's NYLORUN_A2A_WAIT_MS is not the A2aWaitMs parameter")
    for name, event in api.get("Events", {}).items():
        millis = event.get("Properties", {}).get("TimeoutInMillis")
        if event.get("Type") == "HttpApi" and millis is not None and not max_s + MARGIN_S <= millis / 1000 <= 30:
            problems.append(f"ApiFunction event {name}: TimeoutInMillis {millis} does not fit the wait")
    return problems


def real_template() -> dict[str, Any]:
    return copy.deepcopy(template.load_template(template.TEMPLATE))


def test_the_template_caps_the_wait_below_the_http_api_limit_and_the_api_timeout() -> None:
    tpl = real_template()
    assert wait_problems(tpl) == []
    # The numbers docs/deploy.md#blocking-wait-capped-at-27-s states are the template's
    page = (Path(__file__).parents[2] / "docs" / "deploy.md").read_text(encoding="utf-8")
    cap = re.search(r"it cannot exceed ([\d,]+)", page)
    timeout = re.search(r"the api function's `Timeout` is (\d+) s", page)
    assert cap and timeout, "docs/deploy.md no longer states the wait's cap and the api function's Timeout"
    assert tpl["Parameters"]["A2aWaitMs"]["MaxValue"] == int(cap.group(1).replace(",", "")) == 27000
    assert tpl["Resources"]["ApiFunction"]["Properties"]["Timeout"] == int(timeout.group(1)) == 30


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(lambda t: t["Parameters"]["A2aWaitMs"].update(MaxValue=300000), "exceeds the HTTP API", id="5-min-cap"),
        pytest.param(lambda t: t["Resources"]["ApiFunction"]["Properties"].update(Timeout=20), "is not above", id="short-timeout"),
        pytest.param(lambda t: t["Parameters"]["A2aWaitMs"].update(Default=29000), "exceeds its MaxValue", id="default-over-max"),
        pytest.param(
            lambda t: t["Resources"]["ApiFunction"]["Properties"]["Events"]["Rpc"]["Properties"].update(TimeoutInMillis=10000),
            "TimeoutInMillis 10000",
            id="short-integration",
        ),
    ],
)
def test_the_wait_check_fails_on_a_broken_copy(edit: Any, expected: str) -> None:
    tpl = real_template()
    edit(tpl)
    assert any(expected in p for p in wait_problems(tpl)), wait_problems(tpl)


def test_the_card_documentation_url_is_the_deployment_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the template: the api function's card documentationUrl comes from the DocumentationUrl parameter
    api_env = real_template()["Resources"]["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert api_env["NYLORUN_DOCUMENTATION_URL"] == {"Ref": "DocumentationUrl"}
    # When the Runtime reads that variable (as the deployed api function does at cold start)
    monkeypatch.setenv("NYLORUN_DOCUMENTATION_URL", "https://example.com/our-agents#limits")
    # Then the cards carry it
    assert Settings.from_env().documentation_url == "https://example.com/our-agents#limits"
