"""An operator and a lost outcome (docs/operate.md; service/operator.py, the runner's `deadline`): the rules, on the
in-memory adapters. A run that dies inside an effect leaves it started, never finished; the retry reports it
uncertain and marks the task as waiting for an operator. The in-memory orchestrator runs a resumed turn at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from nylorun.engine.turn import Turn
from nylorun.ports import NewTurn, Resolution
from nylorun.profile.status import RESOLVED_TEXT, UNKNOWN_OUTCOME_TEXT
from nylorun.protocol.models import CancelTaskRequest, TaskState
from nylorun.service.operator import OperatorService, Refused, gauge, parse_result
from unit_support import OWNER, TYPED, Crash, DiesOnce, Runtime, agent_of, message, runtime


def lost_payment() -> tuple[Runtime, OperatorService, str, DiesOnce]:
    """A task whose payment started and died, retried: WORKING, uncertain, waiting for an operator."""
    pay = DiesOnce(result={"receipt": "R-2"})

    def turn_fn(turn: Turn) -> None:
        turn.reply(f"paid: {turn.effect('pay', pay)}")

    rt = runtime(agent_of(turn_fn))
    record, _ = rt.store.create_turn(NewTurn(owner=OWNER, context_id="ctx", message=message("pay")))
    with pytest.raises(Crash):
        rt.runner.handle({"action": "run", "taskId": record.task_id})
    assert rt.runner.handle({"action": "run", "taskId": record.task_id})["outcome"] == "uncertain"
    return rt, OperatorService(rt.store, rt.orchestrator, rt.scheduler), record.task_id, pay


def queued_behind(rt: Runtime, task_id: str) -> str:
    """A second turn in the same context: queued behind the uncertain one."""
    record, took = rt.store.create_turn(NewTurn(owner=OWNER, context_id="ctx", message=message("next")))
    assert not took
    return record.task_id


def test_a_lost_outcome_is_listed_with_its_effect_name_and_key() -> None:
    # Given a task whose payment lost its outcome
    _rt, ops, task_id, pay = lost_payment()
    # When an operator lists the tasks waiting
    (waiting,) = ops.waiting()
    # Then it is there, with the effect's name and the key it ran with, in attempt 0
    assert waiting.task.task_id == task_id and waiting.effect_name == "pay"
    assert waiting.task.uncertainty.effect_id == pay.keys[0] and waiting.task.uncertainty.attempt == 0
    assert waiting.effect_started_at is not None


def test_resolving_with_a_result_resumes_the_turn_with_that_result_and_the_effect_never_runs_again() -> None:
    rt, ops, task_id, pay = lost_payment()
    # When the operator says the payment finished with receipt R-1
    resumed = ops.resolve(task_id, Resolution(effect_id=pay.keys[0], done=True, result={"receipt": "R-1"}))
    # Then the turn resumed (attempt 1) and completed with that result; the payment ran once only
    assert (resumed.attempt, resumed.again) == (1, False)
    record = rt.record(task_id)
    assert record.state == TaskState.COMPLETED and record.status.message is not None
    assert record.status.message.text() == "paid: {'receipt': 'R-1'}"
    assert len(pay.keys) == 1
    # And it waits for nobody any more
    assert ops.waiting() == [] and record.uncertainty is None


def test_resolving_not_done_runs_the_effect_again_with_the_same_key() -> None:
    rt, ops, task_id, pay = lost_payment()
    # When the operator says the payment never happened
    ops.resolve(task_id, Resolution(effect_id=pay.keys[0], done=False))
    # Then it ran once more, with the same idempotency key, and the turn completed with its result
    assert len(pay.keys) == 2 and pay.keys[0] == pay.keys[1]
    record = rt.record(task_id)
    assert record.state == TaskState.COMPLETED and record.status.message is not None
    assert record.status.message.text() == "paid: {'receipt': 'R-2'}"


def test_the_resolved_status_tells_the_caller_the_turn_goes_on() -> None:
    # Given a resolution whose resumed run has not started yet (the orchestrator's start is held back)
    rt, ops, task_id, pay = lost_payment()
    started: list[tuple[str, int]] = []
    rt.orchestrator.start = lambda task, attempt=0: started.append((task, attempt))  # type: ignore[method-assign]
    ops.resolve(task_id, Resolution(effect_id=pay.keys[0], done=True, result=1))
    # Then the task is WORKING without effects/v1, saying an operator resolved it; attempt 1 was started
    record = rt.record(task_id)
    assert record.state == TaskState.WORKING and record.status.message is not None
    assert record.status.message.text() == RESOLVED_TEXT and not (record.status.message.metadata or {})
    assert started == [(task_id, 1)]


def test_a_repeated_resolution_does_nothing_more_and_another_one_is_refused() -> None:
    rt, ops, task_id, pay = lost_payment()
    same = Resolution(effect_id=pay.keys[0], done=True, result={"receipt": "R-1"})
    ops.resolve(task_id, same)
    version = rt.record(task_id).version
    # When the same resolution comes again
    again = ops.resolve(task_id, same)
    # Then nothing more is written or run
    assert again.again and again.attempt == 1
    assert rt.record(task_id).version == version and len(pay.keys) == 1
    # And a different resolution of the same effect is refused, saying how it was resolved
    with pytest.raises(Refused, match="already resolved"):
        ops.resolve(task_id, Resolution(effect_id=pay.keys[0], done=False))


def test_a_resolution_of_another_effect_or_a_task_not_waiting_is_refused_and_changes_nothing() -> None:
    rt, ops, task_id, pay = lost_payment()
    version = rt.record(task_id).version
    # An effect id that is not the lost one
    with pytest.raises(Refused, match=f"not the effect task {task_id} lost"):
        ops.resolve(task_id, Resolution(effect_id="eff-0000000000000000", done=False))
    # A task that does not exist
    with pytest.raises(Refused, match="no task"):
        ops.resolve("nope", Resolution(effect_id=pay.keys[0], done=False))
    assert rt.record(task_id).version == version and len(pay.keys) == 1
    # A task that is not waiting (it completed)
    done = rt.send("hi")
    with pytest.raises(Refused, match="not waiting for an operator"):
        ops.resolve(done["id"], Resolution(effect_id=pay.keys[0], done=False))
    with pytest.raises(Refused, match="not waiting for an operator"):
        ops.fail(done["id"], "why")


@pytest.mark.parametrize("text", ["{not json", "", "[1,"])
def test_a_result_that_is_not_json_is_refused(text: str) -> None:
    with pytest.raises(Refused, match="--result is not JSON"):
        parse_result(text)


def test_failing_ends_the_task_with_the_reason_and_the_queued_turn_starts() -> None:
    rt, ops, task_id, _pay = lost_payment()
    next_id = queued_behind(rt, task_id)
    assert rt.record(next_id).state == TaskState.SUBMITTED
    # When the operator fails the task
    ops.fail(task_id, "refund checked by hand; nothing was charged")
    # Then it is FAILED with the reason a caller reads, and the turn queued behind it ran
    record = rt.record(task_id)
    assert record.state == TaskState.FAILED and record.status.message is not None
    assert record.status.message.text() == "An operator ended this task: refund checked by hand; nothing was charged"
    assert rt.record(next_id).state not in (TaskState.SUBMITTED, TaskState.WORKING)
    assert ops.waiting() == []


def test_the_deadline_fails_a_task_still_uncertain_in_the_same_attempt_and_the_context_moves_on() -> None:
    rt, _ops, task_id, _pay = lost_payment()
    next_id = queued_behind(rt, task_id)
    # When the deadline of attempt 0 comes and nobody resolved it
    rt.runner.handle({"action": "deadline", "taskId": task_id, "attempt": 0})
    # Then the task FAILED saying the step's outcome is unknown, and the next turn ran
    record = rt.record(task_id)
    assert record.state == TaskState.FAILED and record.status.message is not None
    assert record.status.message.text() == UNKNOWN_OUTCOME_TEXT
    assert rt.record(next_id).state not in (TaskState.SUBMITTED, TaskState.WORKING)


def test_the_deadline_of_an_attempt_an_operator_resolved_does_nothing() -> None:
    # Given a task resolved (attempt 1 resumed), whose resumed run lost the outcome again
    pay = DiesOnce(result="ok")
    calls = {"n": 0}

    def turn_fn(turn: Turn) -> None:
        turn.effect("pay", pay)

        def dies(key: str) -> str:
            calls["n"] += 1
            raise Crash()

        turn.effect("ship", dies)

    rt = runtime(agent_of(turn_fn))
    record, _ = rt.store.create_turn(NewTurn(owner=OWNER, context_id="ctx", message=message("go")))
    task_id = record.task_id
    with pytest.raises(Crash):
        rt.runner.handle({"action": "run", "taskId": task_id})
    rt.runner.handle({"action": "run", "taskId": task_id})
    ops = OperatorService(rt.store, rt.orchestrator, rt.scheduler)
    with pytest.raises(Crash):  # the resumed run (attempt 1) dies inside `ship`
        ops.resolve(task_id, Resolution(effect_id=pay.keys[0], done=True, result="ok"))
    rt.runner.handle({"action": "run", "taskId": task_id})
    marked = rt.record(task_id).uncertainty
    assert marked is not None and marked.attempt == 1
    version = rt.record(task_id).version
    # When attempt 0's deadline comes
    rt.runner.handle({"action": "deadline", "taskId": task_id, "attempt": 0})
    # Then nothing changed: attempt 1 waits for its own deadline
    assert rt.record(task_id).state == TaskState.WORKING and rt.record(task_id).version == version
    # And attempt 1's deadline fails it
    rt.runner.handle({"action": "deadline", "taskId": task_id, "attempt": 1})
    assert rt.record(task_id).state == TaskState.FAILED


def test_any_later_status_write_clears_the_mark() -> None:
    # Given an uncertain task
    rt, ops, task_id, pay = lost_payment()
    # When its caller cancels it
    rt.service.cancel_task(TYPED, CancelTaskRequest(id=task_id))
    # Then no operator is waited for, and a resolution is refused
    assert ops.waiting() == [] and rt.record(task_id).uncertainty is None
    with pytest.raises(Refused, match="not waiting for an operator .it is CANCELED"):
        ops.resolve(task_id, Resolution(effect_id=pay.keys[0], done=False))


def test_the_gauge_counts_the_waiting_tasks_and_the_oldest_wait() -> None:
    rt, ops, task_id, _pay = lost_payment()
    since = datetime.fromisoformat(ops.waiting()[0].task.since)
    assert gauge(rt.store, since + timedelta(seconds=90)) == (1, 90.0)
    ops.fail(task_id, "x")
    assert gauge(rt.store, datetime.now(UTC)) == (0, 0.0)
