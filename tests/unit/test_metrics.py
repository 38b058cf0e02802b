"""The metrics the dashboard shows, as CloudWatch receives them (EMF lines on stdout): one RpcRequests per JSON-RPC
request and one RpcErrors per error answer, by method; a person's answer and an expired wait counted. The app runs
in-process over the in-memory adapters (no network)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nylorun.api.app import create_app
from nylorun.api.auth import Authenticator
from nylorun.engine.agent import AgentRegistry
from nylorun.observability import metrics
from nylorun.protocol.models import TaskState
from unit_support import AGENT, Runtime, agent_of, answer, open_interaction, runtime, state

A2A = {"A2A-Version": "1.0", "Content-Type": "application/json"}


@pytest.fixture(autouse=True)
def metrics_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The local Runtime turns metrics off; on Lambda they are on. Start from an empty shared metric set.
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def emf_lines(out: str) -> list[tuple[str, dict[str, str], float]]:
    """(metric, dimensions, value) for every metric value in the EMF lines printed."""
    found = []
    for line in out.splitlines():
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        emf = json.loads(line)
        spec = emf["_aws"]["CloudWatchMetrics"][0]
        assert spec["Namespace"] == "Nylorun"
        dims = {name: emf[name] for name in spec["Dimensions"][0]}
        for metric in spec["Metrics"]:
            values = emf[metric["Name"]]
            for value in values if isinstance(values, list) else [values]:
                found.append((metric["Name"], dims, value))
    return found


def client_of(rt: Runtime) -> TestClient:
    registry = AgentRegistry([agent_of(lambda turn: turn.reply("hi"))])
    return TestClient(
        create_app(rt.service, registry, rt.settings, Authenticator(rt.settings), hop_to_thread=False)
    )


def rpc(client: TestClient, method: str, params: Any, **headers: str) -> dict[str, Any]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    response = client.post(f"/v1/a2a/agents/{AGENT}", content=body, headers={**A2A, **headers})
    return dict(response.json())


def test_every_request_counts_once_per_method_and_error_answers_count_as_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the app over an in-memory Runtime with one Agent
    client = client_of(runtime(agent_of(lambda turn: turn.reply("hi"))))
    capsys.readouterr()
    # When a caller lists tasks, asks for a task that does not exist, sends a method A2A does not have, and posts text
    assert "result" in rpc(client, "ListTasks", {})
    assert rpc(client, "GetTask", {"id": "no-such-task"})["error"]["code"] == -32001
    assert rpc(client, "tasks/get", {"id": "x"})["error"]["code"] == -32601
    assert "error" in rpc(client, "GetTask", {}, **{"Content-Type": "text/plain"})
    # Then each request is one RpcRequests by method, each error answer one RpcErrors; a caller's made-up method
    # and an unreadable request count as "Invalid", so no caller can mint metrics
    seen = emf_lines(capsys.readouterr().out)
    counts = Counter((name, dims["Method"]) for name, dims, _ in seen)
    assert counts == {
        ("RpcRequests", "ListTasks"): 1,
        ("RpcRequests", "GetTask"): 1,
        ("RpcErrors", "GetTask"): 1,
        ("RpcRequests", "Invalid"): 2,
        ("RpcErrors", "Invalid"): 2,
    }
    assert all(dims == {"service": "nylorun", "Method": dims["Method"]} for _, dims, _ in seen)


def test_no_metric_is_printed_while_metrics_are_disabled(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given metrics disabled, as the local Runtime runs
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    client = client_of(runtime(agent_of(lambda turn: turn.reply("hi"))))
    capsys.readouterr()
    # When a request is served
    rpc(client, "ListTasks", {})
    # Then nothing is printed
    assert emf_lines(capsys.readouterr().out) == []


def test_a_metric_added_a_hundred_times_while_disabled_prints_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given metrics disabled, as the local Runtime runs, in a process that serves many invocations
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    capsys.readouterr()
    # When one metric is added 150 times (Powertools prints a metric's values at its 100th)
    for _ in range(150):
        metrics.add_metric(name="PushDelivered", unit="Count", value=1)
    # Then nothing is printed, and nothing is kept for later
    assert emf_lines(capsys.readouterr().out) == []
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    assert flushed(capsys)["PushDelivered"] == 0


def flushed(capsys: pytest.CaptureFixture[str]) -> Counter[str]:
    capsys.readouterr()
    metrics.flush_metrics()
    return Counter(name for name, _, _ in emf_lines(capsys.readouterr().out))


def test_an_answer_and_an_expired_wait_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    # Given two tasks waiting for a person's approval
    rt = runtime(agent_of(lambda turn: turn.reply("ok" if turn.approval("Go?") else "no")))
    first, second = rt.send("one"), rt.send("two", contextId="other")
    assert state(first) == state(second) == TaskState.AUTH_REQUIRED
    assert flushed(capsys)["InteractionRequested"] == 2
    # When the first is answered
    assert state(rt.send(**answer(first, approved=True))) == TaskState.COMPLETED
    # Then one answer is counted
    assert flushed(capsys)["InteractionAnswered"] == 1
    # And when nobody answers the second in time (the state machine's timeout calls the turn function's expire)
    rt.runner.handle(
        {
            "action": "expire",
            "taskId": second["id"],
            "interactionId": open_interaction(second)["interactionId"],
        }
    )
    # Then one expired wait is counted, and the task failed
    assert flushed(capsys)["InteractionExpired"] == 1
    assert rt.record(second["id"]).state == TaskState.FAILED


def test_metrics_added_from_several_threads_at_once_are_all_counted(capsys: pytest.CaptureFixture[str]) -> None:
    # Given eight threads (as the push function's message groups run side by side), started together, each adding
    # one to the same 90 counts, the interpreter switching threads as often as it can
    import sys
    import threading

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(20):
            start = threading.Barrier(8)

            def add(start: threading.Barrier = start) -> None:
                start.wait()
                for n in range(90):
                    metrics.add_metric(name=f"Count{n}", unit="Count", value=1)

            threads = [threading.Thread(target=add) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            metrics.flush_metrics()
    finally:
        sys.setswitchinterval(switch)
    # Then every add reaches CloudWatch: 20 rounds x 8 threads of each count
    totals = Counter[str]()
    for name, _, value in emf_lines(capsys.readouterr().out):
        totals[name] += int(value)
    assert len(totals) == 90 and set(totals.values()) == {160}
