"""Durable turns end to end: the a2a-sdk client over HTTP, the local Runtime, Step Functions executing the
state machine in moto. What a person and an A2A client see of approvals, questions, connections, plans,
telemetry and cancel (Profile v2)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
import pytest
from a2a.utils.errors import A2AError
from a2a_caller import (
    EFFECTS,
    FILES,
    INTERACTIONS,
    PROFILE,
    PROGRESS,
    TELEMETRY,
    Caller,
    run,
    state,
    status_ext,
)
from conftest import ALICE, rpc, user_message
from consent import connect, disconnect
from nylorun.engine import Agent, Skill, Turn
from nylorun_examples.support import REFUNDS
from nylorun_local.runtime import LocalRuntime
from table_scope import settled, snapshot

SKILL = [Skill(id="t", name="t", description="test", tags=["test"])]


# ---------------------------------------------------------------- test agents
class Probe:
    """Counts how often each effect ran: the outside world an effect changes."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.lock = threading.Lock()

    def hit(self, name: str) -> dict[str, Any]:
        with self.lock:
            self.calls[name] = self.calls.get(name, 0) + 1
            return {"done": name, "n": self.calls[name]}


class SimulatedCrash(BaseException):
    """The process dies: not an agent error the engine may catch (BaseException, like a killed runtime)."""


def _agent(name: str, fn: Any) -> Agent:
    agent = Agent(name=name, description=f"test agent {name}", skills=SKILL)
    agent.turn(fn)
    return agent


@pytest.fixture(scope="module")
def agents(local_runtime: LocalRuntime) -> dict[str, Any]:
    probe = Probe()
    gate = threading.Event()
    crashed: set[str] = set()

    def approve(turn: Turn) -> None:
        turn.plan("Check", "Approve", "Act")
        turn.mark(0, "done")
        turn.mark(1, "active")
        if turn.approval("Send the money?", {"amount": 10}):
            turn.effect("send_money", lambda key: probe.hit(f"send:{turn.task_id}"))
            turn.reply("Sent.")
        else:
            turn.reply("Not sent.")

    def long_plan(turn: Turn) -> None:
        turn.plan(*[f"step {i}" for i in range(25)])
        turn.mark(24, "done")  # beyond the cap: ignored
        turn.reply("planned")

    def slow(turn: Turn) -> None:
        turn.effect("first", lambda key: probe.hit(f"first:{turn.task_id}"))
        gate.wait(15)  # the test cancels here, then opens the gate
        turn.effect("second", lambda key: probe.hit(f"second:{turn.task_id}"))
        turn.reply("finished")

    def crash_mid_effect(turn: Turn) -> None:
        def charge(key: str) -> dict[str, Any]:
            result = probe.hit(f"charge:{turn.task_id}")
            raise SimulatedCrash()  # died before the result was journaled
            return result  # pragma: no cover

        turn.effect("charge", charge)
        turn.reply("charged")

    def crash_after_effect(turn: Turn) -> None:
        result = turn.effect("charge", lambda key: probe.hit(f"charge:{turn.task_id}"))
        if turn.task_id not in crashed:
            crashed.add(turn.task_id)
            raise SimulatedCrash()  # died after the effect was journaled finished
        turn.reply(f"charged {result['n']}")

    def secretive(turn: Turn) -> None:
        turn.plan("Think", "Answer")
        turn.mark(0, "active")
        turn.say("Working on it")
        turn.effect("secret_tool_xyzzy", lambda key: {"internal": "RESULT-SENTINEL-456", "arg": "ARG-SENTINEL-123"})
        turn.usage(tokens=7, cost_usd=0.5)
        turn.mark(0, "done")
        turn.reply("All done.")

    made = {
        "t-approve": approve,
        "t-longplan": long_plan,
        "t-slow": slow,
        "t-crash-mid": crash_mid_effect,
        "t-crash-after": crash_after_effect,
        "t-secretive": secretive,
    }
    for name, fn in made.items():
        local_runtime.add_agent(_agent(name, fn))
    return {"probe": probe, "gate": gate}


def caller(runtime: LocalRuntime, agent: str, extensions: list[str] | None = PROFILE) -> Caller:
    return Caller(runtime.agent_url(agent), ALICE, extensions)


# ---------------------------------------------------------------- approvals
def test_approval_approved_runs_the_effect_once_and_completes(local_runtime: LocalRuntime, agents: dict) -> None:
    async def body() -> None:
        async with caller(local_runtime, "t-approve") as alice:
            # Given a turn waiting for an approval
            task = await alice.send("pay")
            assert state(task) == "TASK_STATE_AUTH_REQUIRED"
            open_ = status_ext(task, INTERACTIONS)
            assert open_["kind"] == "approval" and open_["prompt"] == "Send the money?"
            assert open_["detail"] == {"amount": 10}
            # When the caller approves through interactions/v1
            done = await alice.send("ok", task_id=task["id"], answer={"interactionId": open_["interactionId"], "approved": True})
            # Then the same task completes, and the effect ran exactly once
            assert done["id"] == task["id"]
            assert state(done) == "TASK_STATE_COMPLETED"
            assert done["status"]["message"]["parts"][0]["text"] == "Sent."
            assert agents["probe"].calls[f"send:{task['id']}"] == 1

    run(body)


def test_approval_denied_does_not_run_the_effect(local_runtime: LocalRuntime, agents: dict) -> None:
    async def body() -> None:
        async with caller(local_runtime, "t-approve") as alice:
            task = await alice.send("pay")
            iid = status_ext(task, INTERACTIONS)["interactionId"]
            # When denied
            done = await alice.send("no", task_id=task["id"], answer={"interactionId": iid, "approved": False})
            # Then
            assert state(done) == "TASK_STATE_COMPLETED"
            assert done["status"]["message"]["parts"][0]["text"] == "Not sent."
            assert f"send:{task['id']}" not in agents["probe"].calls

    run(body)


def test_a_text_reply_never_approves(local_runtime: LocalRuntime, agents: dict) -> None:
    async def body() -> None:
        async with caller(local_runtime, "t-approve") as alice:
            task = await alice.send("pay")
            iid = status_ext(task, INTERACTIONS)["interactionId"]
            # When the caller answers "yes" as text
            after = await alice.send("yes, approved, go ahead", task_id=task["id"])
            # Then the approval is still open, nothing resumed, and the status says why
            assert state(after) == "TASK_STATE_AUTH_REQUIRED"
            assert status_ext(after, INTERACTIONS)["interactionId"] == iid
            text = after["status"]["message"]["parts"][0]["text"]
            assert "interactions/v1" in text and "does not" in text
            assert f"send:{task['id']}" not in agents["probe"].calls
            # And the typed answer still works afterwards
            done = await alice.send("ok", task_id=task["id"], answer={"interactionId": iid, "approved": True})
            assert state(done) == "TASK_STATE_COMPLETED"

    run(body)


def test_only_a_json_boolean_approves(local_runtime: LocalRuntime, agents: dict, table_items: Any) -> None:
    # Given an open approval
    url = local_runtime.agent_url("t-approve")
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}", "A2A-Extensions": INTERACTIONS}
    task = rpc(url, "SendMessage", {"message": user_message("pay")}, headers=headers)["result"]["task"]
    iid = task["status"]["message"]["metadata"][INTERACTIONS]["interactionId"]
    before = settled(table_items, ["t-approve"])
    # When the answer's `approved` is a string, a number, null or a list (each refused, so the same approval
    # stays open for the next)
    for approved in ("y", "yes", "true", 1, None, [True]):
        answer = user_message("ok", taskId=task["id"], extensions=[INTERACTIONS],
                              metadata={INTERACTIONS: {"interactionId": iid, "approved": approved}})
        refused = rpc(url, "SendMessage", {"message": answer}, headers=headers)
        # Then -32602 says so
        assert refused.get("error", {}).get("code") == -32602, (approved, refused)
        assert "boolean" in refused["error"]["message"] or "approved" in refused["error"]["message"]
    # And nothing changed, and the effect never ran
    assert snapshot(table_items, ["t-approve"]) == before
    assert f"send:{task['id']}" not in agents["probe"].calls


def test_an_answer_not_listed_in_extensions_is_refused_with_what_to_add(
    local_runtime: LocalRuntime, agents: dict, table_items: Any
) -> None:
    # Given an open approval
    url = local_runtime.agent_url("t-approve")
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}", "A2A-Extensions": INTERACTIONS}
    task = rpc(url, "SendMessage", {"message": user_message("pay")}, headers=headers)["result"]["task"]
    iid = task["status"]["message"]["metadata"][INTERACTIONS]["interactionId"]
    before = settled(table_items, ["t-approve"])
    # When a well-formed approval arrives in metadata, but the message does not list interactions/v1
    answer = user_message("ok", taskId=task["id"], metadata={INTERACTIONS: {"interactionId": iid, "approved": True}})
    refused = rpc(url, "SendMessage", {"message": answer}, headers=headers)
    # Then -32602 naming what to add, and nothing changed
    assert refused["error"]["code"] == -32602, refused
    assert INTERACTIONS in refused["error"]["message"] and "extensions" in refused["error"]["message"]
    assert snapshot(table_items, ["t-approve"]) == before
    assert f"send:{task['id']}" not in agents["probe"].calls


def test_a_retried_text_reply_is_recorded_once(local_runtime: LocalRuntime, agents: dict) -> None:
    # Given an open approval and a text reply to it
    url = local_runtime.agent_url("t-approve")
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}", "A2A-Extensions": INTERACTIONS}
    task = rpc(url, "SendMessage", {"message": user_message("pay")}, headers=headers)["result"]["task"]
    reply = user_message("yes please", taskId=task["id"])
    first = rpc(url, "SendMessage", {"message": reply}, headers=headers)["result"]["task"]
    # When the caller retries that very message (its answer was lost on the way back)
    again = rpc(url, "SendMessage", {"message": reply}, headers=headers)["result"]["task"]
    # Then the retry is the same message: in history once, and the answer is the task as the first left it
    ids = [m["messageId"] for m in again["history"]]
    assert ids.count(reply["messageId"]) == 1
    assert len(again["history"]) == len(first["history"])


def test_unknown_or_answered_interaction_id_is_invalid_params(local_runtime: LocalRuntime, agents: dict) -> None:
    async def body() -> None:
        async with caller(local_runtime, "t-approve") as alice:
            task = await alice.send("pay")
            iid = status_ext(task, INTERACTIONS)["interactionId"]
            # When the answer names an interaction that is not open
            with pytest.raises(A2AError) as caught:
                await alice.send("ok", task_id=task["id"], answer={"interactionId": "ia-nope", "approved": True})
            # Then -32602 and nothing changed
            assert "interactionId" in caught.value.message
            assert state(await alice.get(task["id"])) == "TASK_STATE_AUTH_REQUIRED"
            # And once answered, the same id is no longer open
            await alice.send("ok", task_id=task["id"], answer={"interactionId": iid, "approved": False})
            with pytest.raises(A2AError):
                await alice.send("ok", task_id=task["id"], answer={"interactionId": iid, "approved": True})

    run(body)


def test_two_racing_answers_exactly_one_wins(local_runtime: LocalRuntime, agents: dict) -> None:
    # Given an open approval
    start = rpc(local_runtime.agent_url("t-approve"), "SendMessage", {"message": user_message("pay")},
                headers={"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}", "A2A-Extensions": INTERACTIONS})
    task = start["result"]["task"]
    iid = task["status"]["message"]["metadata"][INTERACTIONS]["interactionId"]
    results: list[dict[str, Any]] = []

    def answer(approved: bool) -> None:
        message = user_message("x", taskId=task["id"], extensions=[INTERACTIONS],
                               metadata={INTERACTIONS: {"interactionId": iid, "approved": approved}})
        results.append(rpc(local_runtime.agent_url("t-approve"), "SendMessage",
                           {"message": message, "configuration": {"returnImmediately": True}}))

    # When two answers race
    threads = [threading.Thread(target=answer, args=(flag,)) for flag in (True, False)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly one answered the approval: it got the task back
    answered = [r for r in results if r.get("result", {}).get("task", {}).get("id") == task["id"]]
    assert len(answered) == 1, results
    # And the other did not: -32602 when the api read it while the approval was still open; or, when it read it
    # only after the winner's answer was written (two busy cores can order them so), a new turn in the context
    # (docs/calling/busy-contexts.md: a message with the taskId of a working task is a new turn in that
    # context); or, read after the winner's turn had already ended, -32004 (a task in a terminal state takes
    # no more messages)
    (other,) = [r for r in results if r is not answered[0]]
    if "error" in other and other["error"]["code"] == -32004:
        ended = rpc(local_runtime.agent_url("t-approve"), "GetTask", {"id": task["id"]},
                    headers={"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}"})["result"]
        assert ended["status"]["state"] == "TASK_STATE_COMPLETED", (other, ended["status"])
    elif "error" in other:
        assert other["error"]["code"] == -32602, other
    else:
        assert other["result"]["task"]["id"] != task["id"], other
        assert other["result"]["task"]["contextId"] == task["contextId"], other


# ---------------------------------------------------------------- questions, connections, core tier
def test_support_question_connection_approval_walkthrough(local_runtime: LocalRuntime, agents: dict) -> None:
    disconnect(local_runtime.base_url, ALICE)  # connections outlive tasks: this walk connects afresh

    async def body() -> None:
        async with caller(local_runtime, "support") as alice:
            # A question: which order → INPUT_REQUIRED
            task = await alice.send("I want a refund")
            assert state(task) == "TASK_STATE_INPUT_REQUIRED"
            assert status_ext(task, INTERACTIONS)["kind"] == "question"
            # Answered by a typed value → next a connection: AUTH_REQUIRED with kind connection
            iid = status_ext(task, INTERACTIONS)["interactionId"]
            task = await alice.send("A-1002", task_id=task["id"], answer={"interactionId": iid, "value": "A-1002"})
            assert state(task) == "TASK_STATE_AUTH_REQUIRED"
            connection = status_ext(task, INTERACTIONS)
            assert connection["kind"] == "connection" and connection["detail"]["connection"] == "payments"
            # Connected in a browser (docs/writing/connections.md) → the turn resumes by itself to the approval
            await asyncio.to_thread(connect, connection["detail"]["authorizationUrl"])
            task = await alice.wait_for(task["id"], lambda t: (status_ext(t, INTERACTIONS) or {}).get("kind") == "approval")
            approval = status_ext(task, INTERACTIONS)
            assert approval["kind"] == "approval" and approval["detail"]["orderId"] == "A-1002"
            refunds_before = len(REFUNDS)
            task = await alice.send("ok", task_id=task["id"], answer={"interactionId": approval["interactionId"], "approved": True})
            # Then completed, one refund, a receipt artifact, the finished plan
            assert state(task) == "TASK_STATE_COMPLETED"
            assert len(REFUNDS) == refunds_before + 1
            receipt = task["artifacts"][0]
            assert receipt["metadata"][FILES]["kind"] == "receipt" and receipt["metadata"][FILES]["version"] == 1
            assert "Refund R-" in (await asyncio.to_thread(httpx.get, receipt["parts"][0]["url"])).text
            steps = status_ext(task, PROGRESS)["steps"]
            assert [s["state"] for s in steps] == ["done"] * 5

    run(body)


def test_core_tier_gets_text_questions_and_text_still_does_not_approve(local_runtime: LocalRuntime, agents: dict) -> None:
    disconnect(local_runtime.base_url, ALICE)

    async def body() -> None:
        async with caller(local_runtime, "support", extensions=None) as core:
            # Given no extension activated: the question arrives as text only
            task = await core.send("refund please")
            assert state(task) == "TASK_STATE_INPUT_REQUIRED"
            message = task["status"]["message"]
            assert "Which order" in message["parts"][0]["text"]
            assert "metadata" not in message and "extensions" not in message
            # A question can be answered by text in the core tier
            task = await core.send("A-1001", task_id=task["id"])
            assert state(task) == "TASK_STATE_AUTH_REQUIRED"
            # Profile v2: a core-tier caller reads the prompt and where to connect, as text
            text = task["status"]["message"]["parts"][0]["text"]
            assert "Connection needed (payments)" in text and "/v1/a2a/connections/start?task=" in text
            # But a text reply never completes a connection or an approval
            again = await core.send("I connected it", task_id=task["id"])
            assert state(again) == "TASK_STATE_AUTH_REQUIRED"
            assert "metadata" not in again["status"]["message"]

    run(body)


# ---------------------------------------------------------------- progress and telemetry
def test_plan_steps_are_visible_and_capped_at_20(local_runtime: LocalRuntime, agents: dict) -> None:
    async def body() -> None:
        async with caller(local_runtime, "t-longplan") as alice:
            task = await alice.send("plan")
            steps = status_ext(task, PROGRESS)["steps"]
            assert len(steps) == 20
            assert steps[0] == {"label": "step 0", "state": "pending"}
        async with caller(local_runtime, "t-longplan", extensions=[TELEMETRY]) as other:
            task = await other.send("plan")
            assert status_ext(task, PROGRESS) is None  # not activated → not shown

    run(body)


def test_telemetry_on_the_terminal_status(local_runtime: LocalRuntime, agents: dict) -> None:
    async def body() -> None:
        async with caller(local_runtime, "t-secretive") as alice:
            task = await alice.send("go")
            assert state(task) == "TASK_STATE_COMPLETED"
            telemetry = status_ext(task, TELEMETRY)
            assert telemetry["steps"] == 1 and telemetry["tokens"] == 7 and telemetry["costUsd"] == 0.5
            assert telemetry["traceId"].startswith("1-")
            assert TELEMETRY in task["status"]["message"]["extensions"]

    run(body)


# ---------------------------------------------------------------- cancel
def test_cancel_during_a_wait_ends_the_task(local_runtime: LocalRuntime, agents: dict) -> None:
    async def body() -> None:
        async with caller(local_runtime, "t-approve") as alice:
            task = await alice.send("pay")
            # When canceled while waiting for the approval
            canceled = await alice.cancel(task["id"])
            # Then canceled, with its telemetry, and the execution ends
            assert state(canceled) == "TASK_STATE_CANCELED"
            assert status_ext(canceled, TELEMETRY)["steps"] == 0
            sfn = local_runtime.aws.client("stepfunctions")
            arn = local_runtime.stack.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{task['id']}"
            deadline = time.monotonic() + 10
            while sfn.describe_execution(executionArn=arn)["status"] == "RUNNING" and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert sfn.describe_execution(executionArn=arn)["status"] != "RUNNING"
            assert f"send:{task['id']}" not in agents["probe"].calls

    run(body)


def test_cancel_during_a_run_starts_no_further_effect(local_runtime: LocalRuntime, agents: dict) -> None:
    probe, gate = agents["probe"], agents["gate"]
    gate.clear()

    async def body() -> None:
        async with caller(local_runtime, "t-slow") as alice:
            task = await alice.send("go", return_immediately=True)
            # Given the first effect has run and the agent is still working
            deadline = time.monotonic() + 10
            while f"first:{task['id']}" not in probe.calls and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert probe.calls[f"first:{task['id']}"] == 1
            # When the caller cancels, and only then does the agent try its next effect
            canceled = await alice.cancel(task["id"])
            gate.set()
            assert state(canceled) == "TASK_STATE_CANCELED"
            # Then the second effect never starts, and the task stays canceled
            final = await alice.wait_for(task["id"], lambda t: False, timeout=1.0)
            assert state(final) == "TASK_STATE_CANCELED"
            assert f"second:{task['id']}" not in probe.calls

    run(body)


# ---------------------------------------------------------------- crashes
def test_crash_mid_effect_reports_uncertain_and_never_reruns_it(local_runtime: LocalRuntime, agents: dict) -> None:
    async def body() -> None:
        async with caller(local_runtime, "t-crash-mid") as alice:
            # Given a turn whose process dies after the effect started and before its result was journaled
            task = await alice.send("charge", return_immediately=True)
            # When Step Functions retries the turn (replay)
            task = await alice.wait_for(task["id"], lambda t: status_ext(t, EFFECTS) is not None)
            # Then the task stays WORKING with effects/v1 uncertain, and the effect ran exactly once
            assert state(task) == "TASK_STATE_WORKING"
            assert status_ext(task, EFFECTS)["uncertain"].startswith("eff-")
            assert agents["probe"].calls[f"charge:{task['id']}"] == 1

    run(body)


def test_crash_after_effect_replays_the_journaled_result(local_runtime: LocalRuntime, agents: dict) -> None:
    async def body() -> None:
        async with caller(local_runtime, "t-crash-after") as alice:
            task = await alice.send("charge", return_immediately=True)
            task = await alice.wait_for(task["id"], lambda t: state(t) == "TASK_STATE_COMPLETED")
            assert state(task) == "TASK_STATE_COMPLETED"
            # The rerun got the journaled result (n == 1) instead of charging again
            assert task["status"]["message"]["parts"][0]["text"] == "charged 1"
            assert agents["probe"].calls[f"charge:{task['id']}"] == 1

    run(body)


# ---------------------------------------------------------------- redaction
def test_no_effect_name_argument_or_result_reaches_a_caller(local_runtime: LocalRuntime, agents: dict) -> None:
    # Given a capture of every event the Runtime publishes
    sqs, events = local_runtime.aws.client("sqs"), local_runtime.aws.client("events")
    queue = sqs.create_queue(QueueName="redaction-capture")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    bus = local_runtime.stack.event_bus_name
    events.put_rule(Name="redaction", EventBusName=bus, EventPattern=json.dumps({"source": ["nylorun.runtime"]}))
    events.put_targets(Rule="redaction", EventBusName=bus, Targets=[{"Id": "q", "Arn": queue_arn}])
    seen: list[str] = []

    async def body() -> str:
        async with caller(local_runtime, "t-secretive") as alice:
            task = await alice.send("go")
            seen.append(json.dumps(task))
            seen.append(json.dumps(await alice.get(task["id"])))
            return str(task["id"])

    task_id = run(body)
    # When everything a caller can read is collected: answers, GetTask, ListTasks, events
    listed = rpc(local_runtime.agent_url("t-secretive"), "ListTasks", {"historyLength": 10, "includeArtifacts": True},
                 headers={"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}", "A2A-Extensions": ",".join(PROFILE)})
    seen.append(json.dumps(listed))
    deadline = time.monotonic() + 10
    usage_seen = False
    while time.monotonic() < deadline and not usage_seen:
        for message in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", []):
            seen.append(message["Body"])
            body_ = json.loads(message["Body"])
            usage_seen |= body_["detail-type"] == "Turn Usage" and body_["detail"]["taskId"] == task_id
        time.sleep(0.05)
    assert usage_seen, "the ended turn's usage event was published"
    everything = "\n".join(seen)
    # Then the step text and plan are there, but no effect name, argument or result
    assert "Working on it" in everything or "Think" in everything
    for secret in ("secret_tool_xyzzy", "ARG-SENTINEL-123", "RESULT-SENTINEL-456"):
        assert secret not in everything
