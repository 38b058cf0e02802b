"""Durable replay (engine/turn.py, engine/runner.py): every run of a turn runs the agent from the top, and the
journal decides what really runs again. A "crash" is a BaseException the runner does not catch: the run dies
mid-effect as a Lambda that timed out would, and the next `run` is Step Functions' retry."""

from __future__ import annotations

from typing import Any

import pytest
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.domain.messages import totals
from nylorun.engine.turn import Turn
from nylorun.ports import JournalEntry, NewTurn, TurnCanceled
from nylorun.profile.extensions import EFFECTS, TELEMETRY
from nylorun.protocol.models import CancelTaskRequest, GetTaskRequest, TaskState, TaskStatus
from unit_support import (
    OWNER,
    TYPED,
    Calls,
    Crash,
    DiesOnce,
    Runtime,
    agent_of,
    answer,
    message,
    runtime,
    state,
    status_text,
)


def new_task(rt: Runtime, text: str = "go") -> str:
    record, took_context = rt.store.create_turn(NewTurn(owner=OWNER, context_id="ctx", message=message(text)))
    assert took_context
    return record.task_id


def run(rt: Runtime, task_id: str) -> str:
    return str(rt.runner.handle({"action": "run", "taskId": task_id})["outcome"])


def crashed_effect(**options: Any) -> tuple[Runtime, str, DiesOnce]:
    """A turn whose effect `pay` started and died: its journal entry is started, never finished."""
    pay = DiesOnce(result="receipt-1")

    def turn_fn(turn: Turn) -> None:
        turn.reply(f"paid: {turn.effect('pay', pay, **options)}")

    rt = runtime(agent_of(turn_fn))
    task_id = new_task(rt)
    with pytest.raises(Crash):
        run(rt, task_id)
    return rt, task_id, pay


def test_an_effect_journaled_finished_returns_its_journaled_result_without_running_again() -> None:
    # Given a turn that paid, then asked for approval (the run ended there)
    pay = Calls(result="receipt-1")

    def turn_fn(turn: Turn) -> None:
        receipt = turn.effect("pay", pay)
        if turn.approval("Ship it?"):
            turn.reply(f"shipped with {receipt}")

    rt = runtime(agent_of(turn_fn))
    task = rt.send("ship")
    assert state(task) == TaskState.AUTH_REQUIRED and len(pay.keys) == 1
    pay.result = "receipt-2"  # were it run again, the reply would show it
    # When the caller approves and the turn runs again from the top
    done = rt.send(**answer(task, approved=True))
    # Then the payment ran once, and the reply shows the result journaled by the first run
    assert len(pay.keys) == 1
    assert state(done) == TaskState.COMPLETED and status_text(done) == "shipped with receipt-1"


def test_usage_reported_before_an_interaction_is_counted_once_in_telemetry() -> None:
    # Given a turn that reports 10 tokens, then asks a question (so it runs twice)
    def turn_fn(turn: Turn) -> None:
        turn.usage(tokens=10, cost_usd=0.5)
        turn.reply(f"size {turn.question('Which size?')}")

    rt = runtime(agent_of(turn_fn))
    task = rt.send("order")
    # When the caller answers
    done = rt.send(**answer(task, value="M"))
    # Then the final telemetry counts the report once, not once per run
    telemetry = done["status"]["message"]["metadata"][TELEMETRY]
    assert (telemetry["tokens"], telemetry["costUsd"]) == (10, 0.5)


def test_the_final_telemetry_counts_what_the_journal_holds_across_runs_and_nothing_of_a_raised_effect() -> None:
    # Given a turn that pays and reports usage, asks for approval (so it runs twice), then ships (an effect), tries a
    # refund whose function raises (the agent goes on) and reports more usage
    def refund(key: str) -> str:
        raise ConnectionError("refund service down")

    def turn_fn(turn: Turn) -> None:
        turn.effect("pay", Calls(result="receipt"))
        turn.usage(tokens=5, cost_usd=0.25)
        if turn.approval("Ship it?"):
            turn.effect("ship", Calls(result="shipped"))
            try:
                turn.effect("refund", refund)
            except ConnectionError:
                pass
            turn.usage(tokens=3, cost_usd=0.5)
            turn.reply("done")

    rt = runtime(agent_of(turn_fn))
    task = rt.send("order")
    # When the caller approves and the turn ends
    done = rt.send(**answer(task, approved=True))
    # Then its telemetry counts both runs' finished effects and usage once each, and not the refund that raised: the
    # same totals the stored journal gives
    telemetry = done["status"]["message"]["metadata"][TELEMETRY]
    assert (telemetry["steps"], telemetry["tokens"], telemetry["costUsd"]) == (2, 8, 0.75)
    stored = totals(rt.store.journal(done["id"]), telemetry["traceId"])
    assert (stored.steps, stored.tokens, stored.cost_usd) == (2, 8, 0.75)


def test_an_effect_started_but_not_finished_is_not_run_again_and_the_task_says_its_outcome_is_uncertain() -> None:
    # Given a run that died inside a (not idempotent) payment
    rt, task_id, pay = crashed_effect()
    # When the turn runs again, twice
    outcomes = [run(rt, task_id), run(rt, task_id)]
    # Then the payment is never repeated: the task stays WORKING and names the lost effect under effects/v1
    assert outcomes == ["uncertain", "uncertain"]
    assert len(pay.keys) == 1
    task = rt.service.get_task(TYPED, GetTaskRequest(id=task_id))
    assert state(task) == TaskState.WORKING
    assert task["status"]["message"]["metadata"][EFFECTS] == {"uncertain": pay.keys[0]}
    assert "outcome was lost" in status_text(task) and "pay" not in status_text(task)  # never tool names


def test_an_idempotent_effect_whose_outcome_was_lost_runs_again_with_the_same_key() -> None:
    # Given a run that died inside an idempotent payment
    rt, task_id, pay = crashed_effect(idempotent=True)
    # When the turn runs again
    assert run(rt, task_id) == "ended"
    # Then the payment ran again with the same idempotency key (the callee dedupes), and the turn completed
    assert len(pay.keys) == 2 and pay.keys[0] == pay.keys[1]
    record = rt.record(task_id)
    assert record.state == TaskState.COMPLETED and record.status.message is not None
    assert record.status.message.text() == "paid: receipt-1"


def test_a_reconciled_effect_is_not_run_again_and_the_turn_goes_on_with_what_reconcile_found() -> None:
    # Given a run that died inside a payment that can be looked up by its key
    asked: list[str] = []

    def reconcile(key: str) -> str:
        asked.append(key)
        return "receipt-found"

    rt, task_id, pay = crashed_effect(reconcile=reconcile)
    # When the turn runs again
    assert run(rt, task_id) == "ended"
    # Then the payment was looked up by the key it was started with, not repeated
    assert asked == pay.keys and len(pay.keys) == 1
    record = rt.record(task_id)
    assert record.state == TaskState.COMPLETED and record.status.message is not None
    assert record.status.message.text() == "paid: receipt-found"


def test_a_reconcile_that_cannot_tell_leaves_the_outcome_uncertain() -> None:
    # Given a run that died inside a payment whose reconcile cannot tell what happened
    rt, task_id, pay = crashed_effect(reconcile=lambda key: None)
    # When the turn runs again
    # Then it is reported uncertain, not repeated
    assert run(rt, task_id) == "uncertain"
    assert len(pay.keys) == 1 and rt.record(task_id).state == TaskState.WORKING


class WritesSeen(InMemoryTaskStore):
    """The store, noting every plan a caller was shown and every artifact written."""

    def __init__(self) -> None:
        super().__init__()
        self.plans: list[list[str]] = []
        self.artifacts = 0

    def set_status(self, task_id: str, status: TaskStatus, **kwargs: Any) -> Any:
        if kwargs.get("plan"):
            self.plans.append([step.state for step in kwargs["plan"]])
        return super().set_status(task_id, status, **kwargs)

    def put_artifact(self, task_id: str, artifact: Any) -> None:
        self.artifacts += 1
        super().put_artifact(task_id, artifact)


def test_while_replaying_no_older_plan_and_no_artifact_is_shown_again() -> None:
    # Given a turn that drafted (plan, artifact), showed step 1 done, and waits for approval
    def turn_fn(turn: Turn) -> None:
        turn.plan("Draft", "Send")
        turn.mark(0, "active")
        turn.effect("draft", Calls())
        turn.artifact("the draft", name="draft")
        turn.mark(0, "done")
        if turn.approval("Send it?"):
            turn.mark(1, "active")
            turn.effect("send", Calls())
            turn.mark(1, "done")
        turn.reply("sent")

    store = WritesSeen()
    rt = runtime(agent_of(turn_fn), store=store)
    task = rt.send("mail")
    assert store.plans[-1] == ["done", "pending"] and store.artifacts == 1
    shown_before = len(store.plans)
    # When the caller approves (the turn replays the plan, the draft and the marks from the top)
    rt.send(**answer(task, approved=True))
    # Then the caller never sees the plan go back to an older one, and the draft is not written again
    replayed = store.plans[shown_before:]
    assert replayed and all(states[0] == "done" for states in replayed)
    assert replayed[-1] == ["done", "done"]
    assert store.artifacts == 1


def test_an_agent_that_asks_something_else_at_a_journaled_position_fails_the_turn_without_internals() -> None:
    # Given a turn that paid, then waits for approval; on its next run the agent's code asks another effect there
    which = {"name": "pay"}
    refund = Calls()

    def turn_fn(turn: Turn) -> None:
        turn.effect(which["name"], refund if which["name"] == "refund" else Calls())
        turn.approval("Ship it?")
        turn.reply("shipped")

    rt = runtime(agent_of(turn_fn))
    task = rt.send("ship")
    which["name"] = "refund"
    # When the caller approves and the turn replays
    done = rt.send(**answer(task, approved=True))
    # Then the turn fails with a plain message: the other effect never ran, nothing of the code leaks
    assert state(done) == TaskState.FAILED
    assert status_text(done) == "The agent could not complete this turn."
    assert refund.keys == []


def test_after_a_cancel_no_further_effect_starts() -> None:
    # Given a turn whose first effect is still running when the caller cancels the task
    second = Calls()
    rt: Runtime

    def cancel_meanwhile(key: str) -> str:
        rt.service.cancel_task(TYPED, CancelTaskRequest(id=task_id))
        return "first done"

    def turn_fn(turn: Turn) -> None:
        turn.effect("first", cancel_meanwhile)
        turn.effect("second", second)
        turn.reply("all done")

    rt = runtime(agent_of(turn_fn))
    task_id = new_task(rt)
    # When the turn goes on to its next effect
    assert run(rt, task_id) == "ended"
    # Then the second effect never ran and the task stays canceled, with the cancel's own message
    assert second.keys == []
    record = rt.record(task_id)
    assert record.state == TaskState.CANCELED and record.status.message is not None
    assert record.status.message.text() == "Canceled at the caller's request."
    assert sorted(rt.store.journal(task_id)) == [1]


def test_the_journal_refuses_to_start_an_effect_once_the_cancel_is_recorded() -> None:
    # Given a canceled task
    rt = runtime(agent_of(lambda turn: None))
    task_id = new_task(rt)
    rt.store.set_status(task_id, TaskStatus(state=TaskState.CANCELED), expect={TaskState.SUBMITTED})
    # When a run (started before the cancel) tries to start an effect
    # Then the store refuses, and nothing is journaled
    with pytest.raises(TurnCanceled):
        rt.store.journal_start(task_id, JournalEntry(seq=1, kind="effect", name="pay"))
    assert rt.store.journal(task_id) == {}
