"""Each log line carries the keys of the code that wrote it (nylorun.observability): the local Runtime runs every
function in one process, side by side on threads, and a line took the function name of whichever had set its keys
last. Deployed, a function's own threads (the push function's message groups) keep its invocation's keys."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from nylorun.adapters.sqs import process_groups_at_once
from nylorun.observability import SERVICE, log_keys, logger


class Lines(logging.Handler):
    """The JSON lines the Runtime's logger writes, as its own handler formats them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(logger.registered_formatter.format(record)))


@pytest.fixture()
def lines() -> Iterator[list[dict[str, Any]]]:
    handler = Lines()
    python_logger = logging.getLogger(SERVICE)
    level = python_logger.level
    python_logger.setLevel(logging.INFO)
    python_logger.addHandler(handler)
    yield handler.lines
    python_logger.removeHandler(handler)
    python_logger.setLevel(level)


def function(name: str, set_keys: threading.Event, other_set: threading.Event) -> None:
    """A function's invocation on a thread of its own: sets its keys, logs once the other one has set its own."""
    logger.append_keys(function_name=name)
    set_keys.set()
    other_set.wait(5)
    logger.info(f"from {name}")


def test_two_functions_on_two_threads_each_log_under_their_own_name(lines: list[dict[str, Any]]) -> None:
    # Given two functions running at once in one process, the second setting its keys before the first logs
    turn_set, api_set = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=function, args=("turn", turn_set, api_set)),
        threading.Thread(target=function, args=("api", api_set, turn_set)),
    ]
    # When both log
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then each line names the function that wrote it
    names = {line["message"]: line.get("function_name") for line in lines}
    assert names == {"from turn": "turn", "from api": "api"}


def test_a_functions_message_groups_log_under_its_invocation_keys(lines: list[dict[str, Any]]) -> None:
    # Given the push function's invocation keys, set on the invocation's thread
    def invocation() -> None:
        logger.append_keys(function_name="push")
        event = {"Records": [{"attributes": {"MessageGroupId": group}} for group in ("a", "b")]}

        def process_group(group_event: dict[str, Any]) -> dict[str, Any]:
            logger.info("group " + group_event["Records"][0]["attributes"]["MessageGroupId"])
            return {"batchItemFailures": []}

        # When its message groups run side by side on threads of their own
        process_groups_at_once(event, process_group, 10)

    thread = threading.Thread(target=invocation)
    thread.start()
    thread.join()
    # Then each group's lines carry the invocation's function name
    assert sorted((line["message"], line.get("function_name")) for line in lines) == [
        ("group a", "push"),
        ("group b", "push"),
    ]


def test_a_requests_keys_and_those_its_turn_added_are_gone_after_it(lines: list[dict[str, Any]]) -> None:
    # Given the keys this thread logs with, a JSON-RPC request's keys, and a turn run inside it that adds its task's
    logger.info("before")
    with log_keys(rpc_method="SendMessage", agent="echo-keys"):
        logger.append_keys(task_id="t-keys", context_id="c-keys")
        logger.info("inside")
    # When the next line is logged after the request
    logger.info("after")

    # Then the line inside had them all, and the one after has the keys of the one before, not the request's
    before, inside, after = lines
    keys = ("rpc_method", "agent", "task_id", "context_id")
    assert [inside[key] for key in keys] == ["SendMessage", "echo-keys", "t-keys", "c-keys"]
    assert [after.get(key) for key in keys] == [before.get(key) for key in keys]
