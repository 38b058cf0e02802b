"""Answer sizes (nylorun.limits): measured as Lambda's payload carries them, trimmed oldest history first."""

from __future__ import annotations

import json

from nylorun.limits import answer_bytes, fit_task, payload_bytes
from nylorun.protocol.models import Artifact, Message, Part, Role, Task, TaskState, TaskStatus


def message(text: str) -> Message:
    return Message(message_id=text[:8], role=Role.USER, parts=[Part(text=text)])


def test_payload_bytes_is_the_body_escaped_once_more_as_lambda_carries_it() -> None:
    body = json.dumps({"text": 'say "hi" \\ and é\n'}, separators=(",", ":"))
    assert payload_bytes(body) == len(json.dumps(body))


def test_a_task_that_fits_is_answered_whole() -> None:
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING), history=[message("a" * 100)])
    assert fit_task(task, budget=10_000) is task


def test_a_task_too_large_loses_its_oldest_history_first_then_its_last_artifacts() -> None:
    history = [message(f"{i}" * 1000) for i in range(5)]
    artifacts = [Artifact(artifact_id=f"a{i}", parts=[Part(text='"' * 1000)]) for i in range(3)]
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING), history=history,
                artifacts=artifacts)
    # Two messages too many: the oldest two go
    fitted = fit_task(task, budget=answer_bytes(task.wire()) - 1500)
    assert [m.message_id for m in fitted.history or []] == ["22222222", "33333333", "44444444"]
    assert fitted.artifacts == artifacts and answer_bytes(fitted.wire()) <= answer_bytes(task.wire()) - 1500
    # Room for one artifact only (each `"` of its text weighs 4 bytes in Lambda's payload): no history, the first
    one = task.model_copy(update={"history": None, "artifacts": artifacts[:1]})
    assert answer_bytes(one.wire()) > 4000
    assert fit_task(task, budget=answer_bytes(one.wire())) == one
