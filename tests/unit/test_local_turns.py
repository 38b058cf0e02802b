"""The local moto server's turns (local/nylorun_local/turns.py): one request at a time, flows served in turns, so
one task's many calls do not make another task's wait behind all of them (the fair-push figure: bench/README.md);
and the flow the local push environments name for each AWS call: the task of the message being handled."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from nylorun_local.push_processes import calls_by_task, task_of
from nylorun_local.turns import FLOW_HEADER, Turns


def _wait_until(check: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_flow_that_arrives_late_is_served_before_the_rest_of_a_busy_one() -> None:
    turns = Turns()
    served: list[str] = []
    queued = threading.Semaphore(0)

    def request(name: str, flow: str) -> None:
        queued.release()
        with turns.serving(flow):
            served.append(name)

    threads = []
    with turns.serving("first"):  # the turn is held while the others line up, one after another
        for name, flow in [("a1", "big"), ("a2", "big"), ("a3", "big"), ("b1", "other")]:
            thread = threading.Thread(target=request, args=(name, flow))
            thread.start()
            threads.append(thread)
            queued.acquire()
            lined_up = len(threads)
            _wait_until(lambda: turns.waiting == lined_up)  # noqa: B023 - called before the loop moves on
    for thread in threads:
        thread.join(5)
    # In arrival order (a plain lock or queue) b1 would be last, behind every one of the busy flow's requests.
    assert served == ["a1", "b1", "a2", "a3"]
    assert turns.waiting == 0


def test_a_holder_that_sleeps_lets_the_next_request_in() -> None:
    turns = Turns()
    events: list[str] = []

    def long_poll() -> None:
        with turns.serving("poller"):
            events.append("poll looks")
            turns.sleep(0.3)  # moto's long poll between two looks at its queue
            events.append("poll looks again")

    poller = threading.Thread(target=long_poll)
    poller.start()
    _wait_until(lambda: events == ["poll looks"])
    with turns.serving("other"):  # would wait for the whole poll if the sleep kept the turn
        events.append("other served")
    poller.join(5)
    assert events == ["poll looks", "other served", "poll looks again"]


def test_sleep_outside_a_turn_only_sleeps() -> None:
    turns = Turns()
    holding, done = threading.Event(), threading.Event()

    def holder() -> None:
        with turns.serving("holder"):
            holding.set()
            done.wait(5)

    def late_request() -> None:
        with turns.serving("late"):
            pass

    first, late = threading.Thread(target=holder), threading.Thread(target=late_request)
    first.start()
    holding.wait(5)
    late.start()
    _wait_until(lambda: turns.waiting == 1)
    turns.sleep(0)  # this thread holds no turn: it must not hand the holder's on to the late request
    assert turns.waiting == 1 and late.is_alive()
    done.set()
    first.join(5)
    late.join(5)
    assert not late.is_alive() and turns.waiting == 0


def test_the_task_of_a_push_message() -> None:
    assert task_of(json.dumps({"fanOut": {"detail": {"taskId": "t-1", "eventId": "e"}}})) == "t-1"
    assert task_of(json.dumps({"delivery": {"task_id": "t-2", "config_id": "c"}})) == "t-2"
    assert task_of(json.dumps({"detail-type": "an older version's event"})) == ""


class _Sent(Exception):
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


def test_each_call_made_for_a_message_names_its_task(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    client: list[Any] = []

    def record_handler(record: Any) -> None:
        client[0].list_queues()

    module = SimpleNamespace(record_handler=record_handler)
    calls_by_task(module)
    closed = "http://127.0.0.1:9"
    sqs = boto3.client(
        "sqs", region_name="us-east-1", endpoint_url=closed, aws_access_key_id="k", aws_secret_access_key="s"
    )

    def capture(request: Any, **_: Any) -> None:
        raise _Sent(dict(request.headers))  # nothing leaves the machine

    sqs.meta.events.register("before-send", capture)
    client.append(sqs)
    with pytest.raises(_Sent) as during:
        module.record_handler(SimpleNamespace(body=json.dumps({"delivery": {"task_id": "t-9"}})))
    assert during.value.headers[FLOW_HEADER] == "t-9"
    with pytest.raises(_Sent) as after:  # outside a message's handling: its connection's flow
        sqs.list_queues()
    assert FLOW_HEADER not in after.value.headers
