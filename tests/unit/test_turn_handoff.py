"""One turn at a time per context, in arrival order (service/scheduler.py): the ending turn starts the next
queued one, a canceled queued turn never runs, and the context queue's message is the backstop when the
hand-off was lost (`dispatch`)."""

from __future__ import annotations

import pytest
from nylorun.adapters.memory import InMemoryContextQueue, InMemoryTaskStore
from nylorun.engine.turn import Turn
from nylorun.ports import NewTurn
from nylorun.protocol.models import CancelTaskRequest, TaskState, TaskStatus
from nylorun.service.scheduler import ContextStillBusy, TurnScheduler, queue_group
from unit_support import OWNER, TYPED, Runtime, agent_of, answer, message, runtime, state


class Starts:
    """A turn orchestrator that only notes which executions were started (named by task id)."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def start(self, task_id: str) -> None:
        self.started.append(task_id)

    def resume(self, token: str) -> None: ...

    def abandon(self, token: str, reason: str) -> None: ...

    def stop(self, task_id: str) -> None: ...


def conversation() -> tuple[Runtime, list[str]]:
    """A Runtime whose agent notes each turn it runs; a turn saying "ask" waits for an answer."""
    ran: list[str] = []

    def turn_fn(turn: Turn) -> None:
        if turn.text not in ran:
            ran.append(turn.text)
        if turn.text == "ask":
            turn.question("Sure?")
        turn.reply(f"did {turn.text}")

    return runtime(agent_of(turn_fn)), ran


def test_the_turn_that_ends_starts_the_next_queued_one() -> None:
    # Given a context whose first turn waits for an answer, and a second message queued behind it
    rt, ran = conversation()
    first = rt.send("ask", contextId="c1")
    second = rt.send("second", contextId="c1")
    assert state(first) == TaskState.INPUT_REQUIRED and state(second) == TaskState.SUBMITTED
    assert rt.queue.queued == [(second["id"], queue_group(OWNER, "c1"))]  # the backstop holds it
    # When the first turn is answered and ends
    assert state(rt.send("yes", taskId=first["id"])) == TaskState.COMPLETED
    # Then the second turn ran right after it
    assert ran == ["ask", "second"]
    assert rt.record(second["id"]).state == TaskState.COMPLETED


def test_a_canceled_queued_turn_never_runs_and_the_one_behind_it_does() -> None:
    # Given a busy context with two turns queued behind it
    rt, ran = conversation()
    first = rt.send("ask", contextId="c1")
    second = rt.send("second", contextId="c1")
    third = rt.send("third", contextId="c1")
    # When the caller cancels the second, then the first ends
    assert state(rt.service.cancel_task(TYPED, CancelTaskRequest(id=second["id"]))) == TaskState.CANCELED
    rt.send(**answer(first, value="yes"))
    # Then the second never ran and the third did
    assert ran == ["ask", "third"]
    assert rt.record(second["id"]).state == TaskState.CANCELED
    assert rt.record(third["id"]).state == TaskState.COMPLETED


def test_canceling_the_turn_that_holds_the_context_starts_the_next() -> None:
    # Given a context whose first turn waits for an answer, and a second queued
    rt, ran = conversation()
    first = rt.send("ask", contextId="c1")
    second = rt.send("second", contextId="c1")
    # When the caller cancels the first
    rt.service.cancel_task(TYPED, CancelTaskRequest(id=first["id"]))
    # Then the second runs
    assert ran == ["ask", "second"] and rt.record(second["id"]).state == TaskState.COMPLETED


class Backstop:
    """A store, a scheduler over an orchestrator that only notes starts, and a context with turns t1 (holding
    it) and t2 (queued)."""

    def __init__(self) -> None:
        self.store = InMemoryTaskStore()
        self.orchestrator = Starts()
        self.queue = InMemoryContextQueue()
        self.scheduler = TurnScheduler(self.store, self.orchestrator, self.queue)
        self.t1 = self.submit("one")
        self.t2 = self.submit("two")

    def submit(self, text: str) -> str:
        record, took_context = self.store.create_turn(NewTurn(owner=OWNER, context_id="c1", message=message(text)))
        self.scheduler.submitted(record, took_context)
        return record.task_id

    def end_without_handoff(self, task_id: str) -> None:
        """The turn ends, and the run dies before it could start the next turn."""
        self.store.set_status(task_id, TaskStatus(state=TaskState.COMPLETED), expect={TaskState.SUBMITTED})


def test_the_queue_message_waits_while_the_context_is_busy() -> None:
    # Given a queued turn behind a running one
    b = Backstop()
    assert b.orchestrator.started == [b.t1] and [t for t, _ in b.queue.queued] == [b.t2]
    # When the backstop delivers its queue message
    # Then it stays (ContextStillBusy: SQS shows it again later) and nothing starts
    with pytest.raises(ContextStillBusy):
        b.scheduler.dispatch(b.t2)
    assert b.orchestrator.started == [b.t1]


def test_the_queue_message_starts_the_next_turn_when_the_hand_off_was_lost() -> None:
    # Given a turn that ended without starting the one queued behind it
    b = Backstop()
    b.end_without_handoff(b.t1)
    # When the backstop delivers the queued turn's message
    b.scheduler.dispatch(b.t2)
    # Then that turn takes the context and starts
    assert b.orchestrator.started == [b.t1, b.t2]
    assert b.store.context_state(OWNER, "c1")["activeTask"] == b.t2


def test_the_queue_message_restarts_a_claimed_turn_whose_start_was_lost_and_never_starts_one_twice() -> None:
    # Given a queued turn that took the context, but whose start was lost
    b = Backstop()
    b.end_without_handoff(b.t1)
    assert b.store.claim_next(OWNER, "c1") == b.t2
    # When the backstop delivers its message, then delivers it again once the turn runs
    b.scheduler.dispatch(b.t2)
    b.store.set_status(b.t2, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
    b.scheduler.dispatch(b.t2)
    # Then it was started once more by the backstop, and not again once it ran
    assert b.orchestrator.started == [b.t1, b.t2]


def test_the_queue_message_of_a_canceled_queued_turn_starts_nothing() -> None:
    # Given a queued turn the caller canceled
    b = Backstop()
    b.store.set_status(b.t2, TaskStatus(state=TaskState.CANCELED), expect={TaskState.SUBMITTED})
    # When its queue message arrives, even after the context is free
    b.scheduler.dispatch(b.t2)
    b.end_without_handoff(b.t1)
    b.scheduler.dispatch(b.t2)
    # Then it is done with (no error, so the message goes) and never started
    assert b.orchestrator.started == [b.t1]


def test_a_retried_send_starts_a_turn_that_holds_its_context_and_queues_one_that_does_not() -> None:
    # Given two turns whose first attempts may have died before starting or queueing them
    b = Backstop()
    held, queued = b.store.get(b.t1), b.store.get(b.t2)
    assert held is not None and queued is not None
    b.orchestrator.started.clear()
    b.queue.queued.clear()
    # When their messages are sent again
    b.scheduler.resubmitted(held)
    b.scheduler.resubmitted(queued)
    # Then the one holding the context is started (idempotent by name) and the other is queued, not started
    assert b.orchestrator.started == [b.t1]
    assert [t for t, _ in b.queue.queued] == [b.t2]
