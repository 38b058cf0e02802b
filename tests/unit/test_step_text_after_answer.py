"""Step text after a person answers (progress/v1): the rerun that resumes the turn replays the Agent from the top,
so every `say()` made before the question runs again. What the person reads after answering is never one of those:
it is the Runtime's "Answer received; continuing." until the Agent says something new, then the Agent's latest."""

from __future__ import annotations

from typing import Any

import pytest
from nylorun.engine.turn import Turn
from nylorun.protocol.models import TaskState
from unit_support import Crash, Runtime, agent_of, answer, runtime, state, status_text

ANSWERED = "Answer received; continuing."


def refunding(rt: list[Runtime], seen: list[str], dies_once: bool = False) -> Any:
    """An Agent that says where it is, asks for approval, then refunds: its effects note the status text the
    person reads while each runs; with `dies_once`, the run after the answer dies after the first effect."""
    died: list[bool] = []

    def turn_fn(turn: Turn) -> None:
        def shown(result: str) -> Any:
            def effect(key: str) -> str:
                record = rt[0].record(turn.task_id)
                assert record.status.message is not None
                seen.append(str(record.status.message.parts[0].text))
                return result

            return effect

        turn.plan("Check the order", "Refund")
        turn.say("Checking the order")
        if not turn.approval("Refund 25 EUR?"):
            turn.reply("No refund.")
            return
        turn.mark(0, "done")
        turn.effect("reserve", shown("reserved"))
        if dies_once and not died:
            died.append(True)
            raise Crash()
        turn.effect("notify", shown("notified"))
        turn.say("Issuing the refund")
        turn.effect("refund", shown("R-1"))
        turn.reply("Refunded: R-1")

    return agent_of(turn_fn)


def test_after_an_answer_the_step_text_never_goes_back_to_what_was_said_before_the_question() -> None:
    # Given an Agent that said "Checking the order" and then asked for approval
    rt: list[Runtime] = []
    seen: list[str] = []
    rt.append(runtime(refunding(rt, seen)))
    task = rt[0].send("refund A-1001")
    assert state(task) == TaskState.AUTH_REQUIRED
    # When the person approves and the turn resumes
    done = rt[0].send(**answer(task, approved=True))
    # Then while it works on, the person reads that their answer was received, then what the Agent says next:
    # never again the step text from before the question
    assert seen == [ANSWERED, ANSWERED, "Issuing the refund"]
    assert state(done) == TaskState.COMPLETED and status_text(done) == "Refunded: R-1"


def test_a_rerun_after_the_answer_shows_the_same_step_text_as_the_run_it_replaces() -> None:
    # Given a turn resumed by an approval, whose run died after its first effect, before the Agent said anything new
    rt: list[Runtime] = []
    seen: list[str] = []
    rt.append(runtime(refunding(rt, seen, dies_once=True)))
    task = rt[0].send("refund A-1001")
    with pytest.raises(Crash):
        rt[0].send(**answer(task, approved=True))
    # When the turn runs again (Step Functions' retry), replaying the answer and the first effect
    rt[0].runner.handle({"action": "run", "taskId": task["id"]})
    # Then the rerun shows what the run it replaces showed: the answer received, never the text from before
    # the question, until the Agent says something new
    assert seen == [ANSWERED, ANSWERED, "Issuing the refund"]
    assert rt[0].record(task["id"]).state == TaskState.COMPLETED
