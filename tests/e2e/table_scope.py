"""The tasks table as the "changes nothing" checks see it.

The whole session shares one local Runtime, and other test files add their own agents whose queued turns
may still be running in the background while a later test sends its bad input. So a snapshot keeps every
item of the agents under test, plus every item it cannot attribute to an agent (when in doubt, compare
it), and leaves out only items that positively belong to another agent. Keys (see adapters/dynamodb.py):
CTX#<agent>#… and MID#<agent>#… name their agent; TASK#<task>, JRN#<task> and PUSH#<task> belong to the
agent of that task's TASK item, and so does FANOUT#<task> (how far a fan-out in steps got). SUBJ#… items (a
subject's quota counts) are left out: every Agent's turns move them, here and in the background, so a check of
one subject's counts reads that item itself (tests/reliability/test_quotas.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

Item = dict[str, Any]
TableScan = Callable[[], list[Item]]
AGENTS_UNDER_TEST = ("echo", "tck")


def scoped(items: list[Item], agents: Iterable[str] = AGENTS_UNDER_TEST) -> list[Item]:
    wanted = set(agents)
    task_agent = {
        item["taskId"]["S"]: item["agent"]["S"]
        for item in items
        if item["SK"]["S"] == "TASK" and "agent" in item and "taskId" in item
    }

    def agent_of(item: Item) -> str | None:
        kind, _, rest = str(item["PK"]["S"]).partition("#")
        if kind in ("CTX", "MID"):
            return rest.split("#", 1)[0]
        if kind in ("TASK", "JRN", "PUSH", "FANOUT"):
            return task_agent.get(rest)
        return None

    return [
        item
        for item in items
        if not str(item["PK"]["S"]).startswith("SUBJ#") and ((agent := agent_of(item)) is None or agent in wanted)
    ]


def snapshot(table_items: TableScan, agents: Iterable[str] = AGENTS_UNDER_TEST) -> list[Item]:
    """The scoped table now, without waiting."""
    return scoped(table_items(), agents)


# How long the scoped table must stay the same to count as settled: a turn's writes can come apart by the
# local pollers' longest idle sleep (nylorun_local.activity.IDLE_MAX_SECONDS, 1 s; e.g. a wait token parked
# after the AUTH_REQUIRED answer went out), more on two busy cores. A snapshot costs milliseconds (conftest).
QUIET_SECONDS = 1.5


def settled(table_items: TableScan, agents: Iterable[str] = AGENTS_UNDER_TEST) -> list[Item]:
    """The scoped table once no write of the agents under test is landing (an earlier turn may be ending)."""
    agents = tuple(agents)
    deadline = time.monotonic() + 30
    previous, since = snapshot(table_items, agents), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        current = snapshot(table_items, agents)
        if current != previous:
            previous, since = current, time.monotonic()
        elif time.monotonic() - since >= QUIET_SECONDS:
            return current
    raise AssertionError("the tasks table never stopped changing")
