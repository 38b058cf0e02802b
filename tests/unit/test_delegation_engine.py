"""`Turn.delegate` (engine/delegation.py) on the in-memory Runtime, with a scripted delegate: what is sent,
what is journaled, what a rerun does, and what the caller is asked. The whole path over HTTP, with `support` as the
delegate, is tests/e2e/test_delegation.py."""

from __future__ import annotations

from typing import Any

from nylorun.engine.delegation import DelegationDeps
from nylorun.engine.turn import Turn
from nylorun.ports.delegation import DelegateUnavailable
from nylorun.profile.extensions import INTERACTIONS, TELEMETRY
from nylorun.protocol.models import TaskState
from unit_support import agent_of, answer, open_interaction, runtime, state, status_text

URL = "https://delegate.example/v1/a2a/agents/support/"


def task(state: str, message: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "d-1", "contextId": "dc-1", "status": {"state": f"TASK_STATE_{state}", **({"message": message} if message else {})}}


class Delegate:
    """A scripted A2A delegate: answers each call with the next task of its script; records what it was sent."""

    def __init__(self, *script: dict[str, Any], refuse: int | None = None) -> None:
        self.script, self.refuse = list(script), refuse
        self.sent: list[dict[str, Any]] = []
        self.reads = 0

    def _next(self) -> dict[str, Any]:
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def send(self, url: str, headers: dict[str, str], params: dict[str, Any]) -> dict[str, Any]:
        if self.refuse is not None:
            raise DelegateUnavailable("refused", self.refuse)
        self.sent.append({"headers": headers, **params})
        return {"task": self._next()}

    def get_task(self, url: str, headers: dict[str, str], task_id: str) -> dict[str, Any]:
        self.reads += 1
        return self._next()

    def find_tasks(self, url: str, headers: dict[str, str], context_id: str) -> list[dict[str, Any]]:
        return []

    def cancel(self, url: str, headers: dict[str, str], task_id: str) -> dict[str, Any]:
        return task("CANCELED")

    def signing_keys(self, url: str, headers: dict[str, str]) -> list[str]:
        return []


def delegating(delegate: Delegate):  # type: ignore[no-untyped-def]
    def run(turn: Turn) -> None:
        result = turn.delegate(URL, "Please refund order A-1001", credentials="agent-token")
        turn.reply(f"{result.state}: {result.text}")

    rt = runtime(agent_of(run))
    rt.runner._delegation = DelegationDeps(client=delegate, sealer=None, callback_base=None, timeout_seconds=3600)
    return rt


def test_a_delegate_that_ends_at_once_returns_its_result_and_its_usage_counts() -> None:
    done = {"messageId": "d-m", "role": "ROLE_AGENT", "parts": [{"text": "Refunded."}],
            "metadata": {TELEMETRY: {"steps": 2, "tokens": 470, "costUsd": 0.0016, "traceId": "t"}}}
    delegate = Delegate(task("COMPLETED", done))
    rt = delegating(delegate)
    finished = rt.send("go")
    assert state(finished) == TaskState.COMPLETED and status_text(finished) == "completed: Refunded."
    assert finished["status"]["message"]["metadata"][TELEMETRY]["tokens"] == 470
    # Sent once, as A2A 1.0 wants it: the Agent's credentials, returnImmediately, a messageId and contextId of its own
    (sent,) = delegate.sent
    assert sent["headers"]["Authorization"] == "Bearer agent-token"
    # on behalf of the turn's own caller: an opaque scope, never the caller's subject (nylorun.domain.behalf)
    assert set(sent["headers"]) == {"Authorization", "Nylorun-On-Behalf-Of"}
    assert len(sent["headers"]["Nylorun-On-Behalf-Of"]) == 32
    assert sent["configuration"] == {"returnImmediately": True}  # no callback URL known: no push config, polling
    assert sent["message"]["parts"] == [{"text": "Please refund order A-1001"}]


def test_a_working_delegate_parks_the_turn_and_a_rerun_looks_again_without_sending_again() -> None:
    delegate = Delegate(task("WORKING"), task("WORKING"), task("COMPLETED", {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}))
    rt = delegating(delegate)
    first = rt.send("go")
    assert state(first) == TaskState.WORKING  # parked: the turn function is not held
    task_id = first["id"]
    assert rt.runner.handle({"action": "run", "taskId": task_id})["outcome"] == "waiting"  # a poll: still working
    assert rt.runner.handle({"action": "run", "taskId": task_id})["outcome"] == "ended"
    assert rt.record(task_id).state == TaskState.COMPLETED
    assert len(delegate.sent) == 1 and delegate.reads == 2
    kinds = [e.kind for e in rt.store.journal(task_id).values()]
    assert kinds == ["effect", "wait", "effect", "wait", "effect"]
    # telemetry/v1 counts the delegation as one step: the looks at its task are waiting, not work
    status = rt.record(task_id).status.message
    assert status is not None and status.metadata is not None and status.metadata[TELEMETRY]["steps"] == 1


def test_a_delegates_question_is_the_callers_and_the_typed_answer_goes_back_typed() -> None:
    asks = {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "Which order?"}],
            "metadata": {INTERACTIONS: {"interactionId": "ia-delegate", "kind": "question", "prompt": "Which order?"}}}
    delegate = Delegate(task("INPUT_REQUIRED", asks), task("COMPLETED", {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}))
    rt = delegating(delegate)
    asked = rt.send("go")
    # The caller is asked the delegate's question, as this task's own interaction (its own id)
    assert state(asked) == TaskState.INPUT_REQUIRED
    interaction = open_interaction(asked)
    assert interaction["prompt"] == "Which order?" and interaction["interactionId"] != "ia-delegate"
    finished = rt.send("A-1001", **answer(asked, value="A-1001"))
    assert state(finished) == TaskState.COMPLETED
    # The answer reached the delegate typed, for its own interaction
    relayed = delegate.sent[1]["message"]
    assert relayed["taskId"] == "d-1" and relayed["metadata"] == {INTERACTIONS: {"interactionId": "ia-delegate", "value": "A-1001"}}


def test_a_delegate_that_refuses_or_fails_comes_back_as_a_result_the_agent_handles() -> None:
    refused = delegating(Delegate(task("COMPLETED"), refuse=-32602)).send("go")
    assert status_text(refused) == "unreachable: The delegate refused the work."
    failed = delegating(Delegate(task("FAILED", {"messageId": "f", "role": "ROLE_AGENT", "parts": [{"text": "no"}]}))).send("go")
    assert state(failed) == TaskState.COMPLETED and status_text(failed) == "failed: no"


def test_a_delegate_unreachable_for_a_moment_is_looked_at_again_rather_than_failing_the_turn() -> None:
    class Flaky(Delegate):
        def get_task(self, url: str, headers: dict[str, str], task_id: str) -> dict[str, Any]:
            self.reads += 1
            if self.reads == 1:
                raise DelegateUnavailable("get: ConnectTimeoutError")
            return task("COMPLETED", {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]})

    delegate = Flaky(task("WORKING"))
    rt = delegating(delegate)
    task_id = rt.send("go")["id"]
    assert rt.runner.handle({"action": "run", "taskId": task_id})["outcome"] == "waiting"  # the look failed: wait again
    assert rt.record(task_id).state == TaskState.WORKING
    assert rt.runner.handle({"action": "run", "taskId": task_id})["outcome"] == "ended"
    assert rt.record(task_id).state == TaskState.COMPLETED and delegate.reads == 2


def test_an_answer_that_is_neither_a_task_nor_a_message_is_a_failure_not_a_success() -> None:
    class Garbled(Delegate):
        def send(self, url: str, headers: dict[str, str], params: dict[str, Any]) -> dict[str, Any]:
            return {"status": "done"}

    finished = delegating(Garbled(task("COMPLETED"))).send("go")
    assert status_text(finished) == "failed: The delegate's answer could not be read."


def test_a_turn_stops_following_a_delegate_before_its_execution_history_would_run_out() -> None:
    class Counting(Delegate):
        canceled = 0

        def cancel(self, url: str, headers: dict[str, str], task_id: str) -> dict[str, Any]:
            Counting.canceled += 1
            return task("CANCELED")

    delegate = Counting(task("WORKING"))  # works for ever
    rt = delegating(delegate)
    assert rt.runner._delegation is not None
    rt.runner._delegation.max_waits = 2
    task_id = rt.send("go")["id"]
    assert rt.runner.handle({"action": "run", "taskId": task_id})["outcome"] == "waiting"  # wait 2
    assert rt.runner.handle({"action": "run", "taskId": task_id})["outcome"] == "ended"  # no third wait
    assert Counting.canceled == 1
    assert rt.record(task_id).state == TaskState.COMPLETED
    assert rt.record(task_id).status.message is not None
    assert "failed: The delegated work took too long to follow" in rt.record(task_id).status.message.text()


def test_a_delegate_with_more_artifacts_than_a_journal_item_holds_gives_what_fits_and_names_the_rest() -> None:
    # Given a delegate that ends with 3 artifacts of 250 KB (its own budget is 4 MiB; one journal item holds 400 KB)
    big = [{"artifactId": f"a-{n}", "name": f"part-{n}", "parts": [{"text": str(n) * 250_000}]} for n in range(3)]
    done = {**task("COMPLETED", {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "made them"}]}), "artifacts": big}
    got: dict[str, Any] = {}

    def run(turn: Turn) -> None:
        result = turn.delegate(URL, "make them", credentials="agent-token")
        got["result"] = result
        turn.reply(f"{result.state}: {result.text}")

    rt = runtime(agent_of(run))
    rt.runner._delegation = DelegationDeps(client=Delegate(done), sealer=None, callback_base=None, timeout_seconds=3600)
    # When the Agent delegates to it
    finished = rt.send("go")
    # Then the Agent gets the delegate's words, the first artifact whole, and the two that did not fit by name
    assert status_text(finished) == "completed: made them"
    result = got["result"]
    assert [a["artifactId"] for a in result.artifacts] == ["a-0"] and result.artifacts[0] == big[0]
    assert [(o["artifactId"], o["name"]) for o in result.omitted] == [("a-1", "part-1"), ("a-2", "part-2")]
    assert all(o["bytes"] > 250_000 for o in result.omitted)
