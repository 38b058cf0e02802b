"""Crash injection: the turn function dies once at each boundary of an effect, and Step Functions retries it
(the state machine's Retry on Lambda errors). Whatever the boundary, the effect runs at most once, no task is
lost, and `effects/v1` `uncertain` is reported exactly when the journal cannot tell whether the effect ran.

The agent is modelled on `support`: a lookup effect, an approval, a refund effect, a reply. The crash is a
BaseException (a dying process, which no agent code may catch) raised once by the turn function's own store
around `journal_start` / `journal_finish` of one effect of one task:

    before-start   nothing journaled, the effect did not run      → the rerun runs it once → COMPLETED
    after-start    journaled started, the effect did not run      → started-not-finished: uncertain
    before-finish  the effect ran, its result was not journaled   → started-not-finished: uncertain
    after-finish   the effect ran and was journaled finished      → the rerun replays it → COMPLETED

`after-start` and `before-finish` leave the same journal (and so does a crash mid-effect): the Runtime cannot
know whether the outside world changed, so it never runs the effect again and reports the outcome as lost.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from nylorun.engine import Turn
from nylorun.ports import JournalEntry
from nylorun_local.runtime import LocalRuntime
from reliability_kit import (
    EFFECTS,
    INTERACTIONS,
    TELEMETRY,
    Probe,
    SimulatedCrash,
    get_task,
    make_agent,
    poll,
    profile_headers,
    rpc,
    state,
    status_ext,
    user_message,
)

pytestmark = pytest.mark.e2e

AGENT = "r-crash-refund"
BOUNDARIES = ["before-start", "after-start", "before-finish", "after-finish"]
OUTCOME_LOST = {"after-start", "before-finish"}  # the journal holds the effect started, never finished
# Every boundary of the refund (the effect after the approval: its rerun replays the lookup and the answer),
# and the lost-outcome boundaries of the lookup (the effect before the approval: the turn never asks).
CASES = [("refund", boundary) for boundary in BOUNDARIES] + [("lookup", boundary) for boundary in sorted(OUTCOME_LOST)]


@dataclass
class Plan:
    effect: str
    boundary: str
    task_id: str | None = None
    seq: int | None = None
    fired: bool = False


class CrashInjector:
    """Wraps the turn function's store: dies once at the planned boundary of the planned effect."""

    def __init__(self, store: Any) -> None:
        self._start = store.journal_start
        self._finish = store.journal_finish
        self.plans: dict[str, Plan] = {}  # by the text of the message that starts the task
        self._by_task: dict[str, Plan] = {}

    def arm(self, text: str, task_id: str) -> None:
        plan = self.plans.get(text)
        if plan is not None:
            plan.task_id = task_id
            self._by_task[task_id] = plan

    def _crash(self, plan: Plan) -> None:
        plan.fired = True
        raise SimulatedCrash()

    def journal_start(self, task_id: str, entry: JournalEntry) -> None:
        plan = self._by_task.get(task_id)
        hit = plan is not None and not plan.fired and entry.kind == "effect" and entry.name == plan.effect
        if plan is not None and hit:
            plan.seq = entry.seq
            if plan.boundary == "before-start":
                self._crash(plan)
        self._start(task_id, entry)
        if plan is not None and hit and plan.boundary == "after-start":
            self._crash(plan)

    def journal_finish(self, task_id: str, seq: int, result: Any) -> None:
        plan = self._by_task.get(task_id)
        hit = plan is not None and not plan.fired and seq == plan.seq
        if plan is not None and hit and plan.boundary == "before-finish":
            self._crash(plan)
        self._finish(task_id, seq, result)
        if plan is not None and hit and plan.boundary == "after-finish":
            self._crash(plan)


@pytest.fixture(scope="module")
def world(local_runtime: LocalRuntime) -> Iterator[tuple[CrashInjector, Probe, str]]:
    store = local_runtime._functions["TurnFunction"].runtime.store
    injector, probe = CrashInjector(store), Probe()

    def refund(turn: Turn) -> None:
        injector.arm(turn.text, turn.task_id)
        turn.plan("Find the order", "Approve the refund", "Refund")
        turn.mark(0, "active")
        order = turn.effect("lookup", lambda key: {**probe.hit(f"lookup:{turn.task_id}"), "amount": 25})
        turn.usage(tokens=10, cost_usd=0.001)
        turn.mark(0, "done")
        if not turn.approval(f"Refund {order['amount']} EUR?", {"amount": order["amount"]}):
            turn.reply("No refund was made.")
            return
        refunded = turn.effect("refund", lambda key: probe.hit(f"refund:{turn.task_id}"))
        turn.reply(f"Refunded (refund #{refunded['n']}).")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "journal_start", injector.journal_start)
        patch.setattr(store, "journal_finish", injector.journal_finish)
        local_runtime.add_agent(make_agent(AGENT, refund))
        yield injector, probe, local_runtime.agent_url(AGENT)


def settled_view(task: dict[str, Any]) -> bool:
    """What a caller waits for: the task asks something, has ended, or reports a lost outcome."""
    return state(task) not in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING") or status_ext(task, EFFECTS) is not None


def send(url: str, message: dict[str, Any]) -> dict[str, Any]:
    params = {"message": message, "configuration": {"returnImmediately": True}}
    answer = rpc(url, "SendMessage", params, headers=profile_headers())
    assert "result" in answer, answer
    return dict(answer["result"]["task"])


def execution_settled(local_runtime: LocalRuntime, task_id: str) -> str:
    """The turn's execution once it settled: its final status, or "WaitForOperator" while a lost outcome waits
    for an operator until the uncertainty deadline (24 h here)."""
    assert local_runtime.stack is not None
    arn = local_runtime.stack.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{task_id}"
    sfn = local_runtime.aws.client("stepfunctions")

    def look() -> str:
        status = str(sfn.describe_execution(executionArn=arn)["status"])
        if status != "RUNNING":
            return status
        events = sfn.get_execution_history(executionArn=arn)["events"]
        entered = [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
        return "WaitForOperator" if entered and entered[-1] == "WaitForOperator" else status

    return poll(look, lambda s: s != "RUNNING", timeout=20, every=0.5)


def assert_never_uncertain(task: dict[str, Any]) -> None:
    assert status_ext(task, EFFECTS) is None, task["status"]
    for message in task.get("history") or []:
        assert EFFECTS not in (message.get("metadata") or {}), message


def approve(url: str, task: dict[str, Any]) -> dict[str, Any]:
    """Answer the open approval through interactions/v1 and wait until the turn settles again."""
    interaction = status_ext(task, INTERACTIONS)
    assert interaction is not None and interaction["kind"] == "approval", task["status"]
    answer = user_message(
        "approve",
        taskId=task["id"],
        extensions=[INTERACTIONS],
        metadata={INTERACTIONS: {"interactionId": interaction["interactionId"], "approved": True}},
    )
    send(url, answer)

    def settled_again(view: dict[str, Any]) -> bool:
        return state(view) != "TASK_STATE_AUTH_REQUIRED" and settled_view(view)

    return poll(lambda: get_task(url, task["id"]), settled_again, every=0.5)


@dataclass
class Observed:
    """What a caller (and the outside world) saw of one crashed turn."""

    first: dict[str, Any] | None = None  # the task once the first run settled (asks, ends, or is uncertain)
    final: dict[str, Any] | None = None  # the task once its execution settled
    fired: bool = False
    execution: str = ""  # how its execution settled (execution_settled)
    calls: tuple[int, int] = (-1, -1)  # (lookups, refunds) run for this task
    failure: BaseException | None = None


def crash_once(
    local_runtime: LocalRuntime, injector: CrashInjector, probe: Probe, url: str, effect: str, boundary: str
) -> Observed:
    seen = Observed()
    try:
        text = f"refund order A-1001 ({uuid.uuid4()})"
        plan = injector.plans[text] = Plan(effect=effect, boundary=boundary)
        task_id = send(url, user_message(text))["id"]
        seen.first = task = poll(lambda: get_task(url, task_id), settled_view, every=0.5)
        if state(task) == "TASK_STATE_AUTH_REQUIRED":
            approve(url, task)
        seen.fired = plan.fired
        seen.execution = execution_settled(local_runtime, task_id)
        seen.final = get_task(url, task_id)
        seen.calls = (probe.calls.get(f"lookup:{task_id}", 0), probe.calls.get(f"refund:{task_id}", 0))
    except BaseException as failure:  # noqa: BLE001 - reported by the test of this case
        seen.failure = failure
    return seen


@pytest.fixture(scope="module")
def observed(
    local_runtime: LocalRuntime, world: tuple[CrashInjector, Probe, str]
) -> dict[tuple[str, str], Observed]:
    """Every case runs at once (each in its own context): the waits are Step Functions' retry intervals."""
    injector, probe, url = world
    with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
        futures = {case: pool.submit(crash_once, local_runtime, injector, probe, url, *case) for case in CASES}
    return {case: future.result() for case, future in futures.items()}


@pytest.mark.parametrize(("effect", "boundary"), CASES, ids=[f"{e}-{b}" for e, b in CASES])
def test_a_crash_at_an_effect_boundary_never_repeats_the_effect_nor_loses_the_task(
    observed: dict[tuple[str, str], Observed], effect: str, boundary: str
) -> None:
    # Given a refund turn whose process died once at this boundary of this effect, retried by Step Functions
    # (and, when the turn got as far as the approval, approved)
    seen = observed[(effect, boundary)]
    if seen.failure is not None:
        raise seen.failure
    assert seen.fired, "the crash was injected"
    assert seen.first is not None and seen.final is not None
    lost = boundary in OUTCOME_LOST
    # When the turn's execution has ended, or waits for an operator when the outcome was lost
    assert seen.execution == ("WaitForOperator" if lost else "SUCCEEDED"), seen.execution
    task = seen.final
    # Then, whatever the boundary, no effect ran more than once
    assert max(seen.calls) <= 1, f"an effect ran twice: (lookups, refunds) = {seen.calls}"

    if not (effect == "lookup" and lost):
        # (the lookup went through, or was replayed, and the turn asked for the approval: nothing uncertain)
        assert state(seen.first) == "TASK_STATE_AUTH_REQUIRED", seen.first["status"]
        assert_never_uncertain(seen.first)
    if lost:
        # And the effect was not run again: once if it had run before the crash, else never
        ran_before_crash = 1 if boundary == "before-finish" else 0
        assert seen.calls == ((ran_before_crash, 0) if effect == "lookup" else (1, ran_before_crash))
        # And the outcome is unknown to the Runtime: the task stays WORKING and says an effect is uncertain
        assert state(task) == "TASK_STATE_WORKING", task["status"]
        assert str(status_ext(task, EFFECTS)["uncertain"]).startswith("eff-")
        return
    # And the task completes, each effect ran exactly once, and nothing was ever reported uncertain
    assert state(task) == "TASK_STATE_COMPLETED", task["status"]
    assert task["status"]["message"]["parts"][0]["text"] == "Refunded (refund #1)."
    assert_never_uncertain(task)
    assert seen.calls == (1, 1)
    # And its telemetry counts two effects, not more
    assert status_ext(task, TELEMETRY)["steps"] == 2
