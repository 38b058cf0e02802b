"""Duplicate deliveries: SQS, DynamoDB streams and Step Functions all deliver at least once, so every handler
they trigger must end in the same state when it runs twice on the same input.

Each test runs a function's real handler (`invoke_registered`, as the local Lambda does) twice on one event:
for the turn function the state machine's payloads (events/turn-*.json), for the others the very records
the local event source mappings delivered (captured on their way to the handler, then delivered again),
which have the shapes Lambda gives (the samples in events/).
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nylorun.engine import Turn
from nylorun.ports import StoredPushConfig
from nylorun.protocol.models import TaskPushNotificationConfig, now_timestamp
from nylorun_local import lambda_shim
from nylorun_local.runtime import LocalRuntime
from reliability_kit import (
    ALICE,
    INTERACTIONS,
    Probe,
    Receiver,
    get_task,
    make_agent,
    own_secrets,
    poll,
    profile_headers,
    rpc,
    state,
    status_ext,
    user_message,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

AGENT = "r-dup"
Invoke = Callable[[str, dict[str, Any]], Any]


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def probe(local_runtime: LocalRuntime) -> Probe:
    """The outside world of the `r-dup` agent: it counts charges. "ask …" first waits for an approval."""
    counter = Probe()

    def run(turn: Turn) -> None:
        if turn.text.startswith("ask") and not turn.approval("Charge the card?", {"amount": 5}):
            turn.reply("Not charged.")
            return
        charged = turn.effect("charge", lambda key: counter.hit(f"charge:{turn.task_id}"))
        turn.reply(f"Charged (charge #{charged['n']}).")

    local_runtime.add_agent(make_agent(AGENT, run))
    return counter


@pytest.fixture(scope="module")
def url(local_runtime: LocalRuntime, probe: Probe) -> str:
    return local_runtime.agent_url(AGENT)


@pytest.fixture()
def invoke(local_runtime: LocalRuntime, delivered: Callable[[str], list[dict[str, Any]]]) -> Invoke:
    """Run a function's real handler once, as Lambda does; a failed invocation fails the test."""
    assert local_runtime.stack is not None
    names = local_runtime.stack.function_names

    def call(function: str, event: dict[str, Any]) -> Any:
        result, error = lambda_shim.invoke_registered(names[function], copy.deepcopy(event))
        assert error is None, result
        return result

    return call


@pytest.fixture()
def delivered(local_runtime: LocalRuntime) -> Iterator[Callable[[str], list[dict[str, Any]]]]:
    """The records each event source mapping hands to a function, captured on the way (passed on as is).

    While a test runs, one invocation of each of these functions runs at a time: on Lambda every concurrent
    invocation has a sandbox of its own, while here the local pollers and the test share one process, and
    the handlers keep per-invocation state at module level (the batch processor, the group delays).
    """
    assert local_runtime.stack is not None
    names = local_runtime.stack.function_names
    seen: dict[str, list[dict[str, Any]]] = {}
    functions = ("DispatchFunction", "PushFunction", "PublishFunction")
    sandboxes = {function: threading.Lock() for function in functions}
    with pytest.MonkeyPatch.context() as patch:
        for function in functions:
            # One spy per execution environment (the push function has several), all under the function's lock.
            spies = [
                _spy(handler, function, sandboxes[function], seen) for handler in lambda_shim._handlers[names[function]]
            ]
            patch.setitem(lambda_shim._handlers, names[function], spies)
        yield lambda function: list(seen.get(function, []))


def _spy(
    handler: Any, function: str, sandbox: threading.Lock, seen: dict[str, list[dict[str, Any]]]
) -> Callable[[dict[str, Any], Any], Any]:
    def spy(event: dict[str, Any], context: Any) -> Any:
        with sandbox:
            seen.setdefault(function, []).extend(copy.deepcopy(event.get("Records", [])))
            return handler(event, context)

    return spy


def turn_event(name: str, **fields: Any) -> dict[str, Any]:
    """A sample state machine payload (events/turn-*.json) for this task."""
    return {**json.loads((REPO_ROOT / "events" / name).read_text()), **fields}


def send(url: str, text: str, **fields: Any) -> dict[str, Any]:
    answer = rpc(url, "SendMessage", {"message": user_message(text, **fields)}, headers=profile_headers())
    assert "result" in answer, answer
    return dict(answer["result"]["task"])


def wait_token(local_runtime: LocalRuntime, task_id: str, interaction_id: str) -> str:
    """The callback token the parked execution waits on (stored by its own park)."""
    store = local_runtime._functions["TurnFunction"].runtime.store
    token = poll(lambda: store.get_wait_token(task_id, interaction_id), lambda t: t is not None)
    assert token is not None, "the turn parked its callback token"
    return str(token)


def approve(url: str, task: dict[str, Any]) -> dict[str, Any]:
    iid = status_ext(task, INTERACTIONS)["interactionId"]
    answer = {"interactionId": iid, "approved": True}
    return send(url, "ok", taskId=task["id"], extensions=[INTERACTIONS], metadata={INTERACTIONS: answer})


# ---------------------------------------------------------------------------------------------- turn function
def test_running_an_ended_turn_again_changes_nothing(url: str, probe: Probe, invoke: Invoke) -> None:
    # Given a turn that has completed after charging once
    task = send(url, "pay")
    assert state(task) == "TASK_STATE_COMPLETED"
    before = get_task(url, task["id"])
    # When the state machine's RunTurn payload is delivered twice more
    outcomes = [invoke("TurnFunction", turn_event("turn-run.json", taskId=task["id"])) for _ in range(2)]
    # Then each says the turn has ended, the task is exactly as it was, and the card was charged once
    assert outcomes == [{"outcome": "ended", "interactionId": None}] * 2
    assert get_task(url, task["id"]) == before
    assert probe.calls[f"charge:{task['id']}"] == 1


def test_parking_twice_with_the_same_token_still_resumes_once(
    local_runtime: LocalRuntime, url: str, probe: Probe, invoke: Invoke
) -> None:
    # Given a turn waiting for an approval, parked on its callback token
    task = send(url, "ask to pay")
    assert state(task) == "TASK_STATE_AUTH_REQUIRED"
    iid = status_ext(task, INTERACTIONS)["interactionId"]
    token = wait_token(local_runtime, task["id"], iid)
    before = get_task(url, task["id"])
    # When the park (and a rerun of the interrupted turn) are delivered twice more
    park = turn_event("turn-park.json", taskId=task["id"], interactionId=iid, token=token)
    parked = [invoke("TurnFunction", park) for _ in range(2)]
    rerun = [invoke("TurnFunction", turn_event("turn-run.json", taskId=task["id"])) for _ in range(2)]
    # Then the task still waits on the same interaction, unchanged
    assert parked == [{"outcome": "parked", "interactionId": iid}] * 2
    assert rerun == [{"outcome": "interrupted", "interactionId": iid}] * 2
    assert get_task(url, task["id"]) == before
    # And the approval resumes it once: completed, charged once
    done = approve(url, task)
    assert state(done) == "TASK_STATE_COMPLETED", done["status"]
    assert probe.calls[f"charge:{task['id']}"] == 1
    # And a park delivered late, after the end, leaves the task as it is
    after = get_task(url, task["id"])
    assert invoke("TurnFunction", park) == {"outcome": "parked", "interactionId": iid}
    assert get_task(url, task["id"]) == after


@pytest.mark.parametrize(
    ("action", "text"),
    [("expire", "No answer arrived in time; the task has ended."), ("fail", "The agent could not complete this turn.")],
)
def test_expiring_or_failing_a_turn_twice_ends_it_once(
    local_runtime: LocalRuntime, url: str, probe: Probe, invoke: Invoke, action: str, text: str
) -> None:
    # Given a turn waiting for an approval
    task = send(url, "ask to pay")
    iid = status_ext(task, INTERACTIONS)["interactionId"]
    token = wait_token(local_runtime, task["id"], iid)
    try:
        # When the state machine's ExpireTurn (or FailTurn) payload is delivered, and then again
        event = {"action": action, "taskId": task["id"]}
        assert invoke("TurnFunction", event) == {"outcome": "ended", "interactionId": None}
        first = get_task(url, task["id"])
        assert invoke("TurnFunction", event) == {"outcome": "ended", "interactionId": None}
        # Then the task failed once, with the caller-facing reason, and the second delivery changed nothing
        assert state(first) == "TASK_STATE_FAILED"
        assert first["status"]["message"]["parts"][0]["text"] == text
        assert get_task(url, task["id"]) == first
        assert [m["parts"][0].get("text") for m in first["history"]].count(text) == 1
        assert f"charge:{task['id']}" not in probe.calls
    finally:
        assert local_runtime.runtime is not None
        local_runtime.runtime.orchestrator.abandon(token, "test over")  # the execution stops waiting


# ---------------------------------------------------------------------------------------------- dispatch function
def test_a_queued_turn_dispatched_twice_runs_once(
    url: str, probe: Probe, invoke: Invoke, delivered: Callable[[str], list[dict[str, Any]]]
) -> None:
    # Given a context busy with a turn waiting for an approval, and a second turn queued behind it
    context_id = f"ctx-{uuid.uuid4()}"
    first = send(url, "ask to pay", contextId=context_id)
    assert state(first) == "TASK_STATE_AUTH_REQUIRED"
    queued = rpc(
        url,
        "SendMessage",
        {"message": user_message("pay", contextId=context_id), "configuration": {"returnImmediately": True}},
    )["result"]["task"]
    assert state(queued) == "TASK_STATE_SUBMITTED"
    records = poll(
        lambda: [r for r in delivered("DispatchFunction") if json.loads(r["body"])["taskId"] == queued["id"]], bool
    )
    assert records, "the context queue delivered the queued turn to the dispatch function"
    event = {"Records": records[:1]}
    # When the same SQS record is delivered twice more while the context is still busy
    busy = [invoke("DispatchFunction", event) for _ in range(2)]
    # Then each time it is kept for later, and the queued task is untouched
    assert busy == [{"batchItemFailures": [{"itemIdentifier": records[0]["messageId"]}]}] * 2
    assert state(get_task(url, queued["id"])) == "TASK_STATE_SUBMITTED"
    # When the first turn ends (approved), the queued one runs; then the record comes twice again
    assert state(approve(url, first)) == "TASK_STATE_COMPLETED"
    done = poll(lambda: get_task(url, queued["id"]), lambda t: state(t) == "TASK_STATE_COMPLETED")
    again = [invoke("DispatchFunction", event) for _ in range(2)]
    # Then the duplicates are done with (deleted), and the queued turn ran exactly once
    assert again == [{"batchItemFailures": []}] * 2
    assert get_task(url, queued["id"]) == done
    assert state(done) == "TASK_STATE_COMPLETED"
    assert probe.calls[f"charge:{queued['id']}"] == 1


# ---------------------------------------------------------------------------------------------- push function
def test_a_push_delivery_delivered_twice_reaches_the_receiver_with_the_same_webhook_id(
    local_runtime: LocalRuntime, invoke: Invoke, delivered: Callable[[str], list[dict[str, Any]]]
) -> None:
    receiver = Receiver(own_secrets(local_runtime.base_url, ALICE))
    try:
        # Given a finished task whose two updates reached its receiver
        echo = local_runtime.agent_url("echo")
        config = {"id": "cfg-dup", "url": receiver.url, "token": "tok-dup"}
        params = {"message": user_message("push twice"), "configuration": {"taskPushNotificationConfig": config}}
        task = rpc(echo, "SendMessage", params)["result"]["task"]
        assert len(receiver.wait(2)) == 2
        records = poll(
            lambda: [
                r
                for r in delivered("PushFunction")
                if json.loads(r["body"]).get("delivery", {}).get("task_id") == task["id"]
                and json.loads(r["body"])["delivery"]["payload"]["status"]["state"] == "TASK_STATE_COMPLETED"
            ],
            bool,
        )
        assert records, "the push queue delivered the COMPLETED update to the push function"
        original = next(r for r in receiver.requests if r["body"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
        config_before = rpc(echo, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg-dup"})
        task_before = rpc(echo, "GetTask", {"id": task["id"]})
        # When that delivery record is delivered twice more
        answers = [invoke("PushFunction", {"Records": records[:1]}) for _ in range(2)]
        # Then the receiver gets it twice more: the same webhook-id and body (at least once; it dedupes on the id)
        assert answers == [{"batchItemFailures": []}] * 2
        requests = receiver.wait(4)
        assert len(requests) == 4
        for duplicate in requests[2:]:
            assert duplicate["verified"]
            assert duplicate["headers"]["webhook-id"] == original["headers"]["webhook-id"]
            assert duplicate["body"] == original["body"]
        # And the config and the task are as they were
        assert rpc(echo, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg-dup"})["result"] == config_before["result"]
        assert rpc(echo, "GetTask", {"id": task["id"]})["result"] == task_before["result"]
    finally:
        receiver.close()


# ---------------------------------------------------------------------------------------------- publish function
@pytest.fixture()
def bus_consumer(local_runtime: LocalRuntime) -> Iterator[Callable[[str], Callable[[], list[dict[str, Any]]]]]:
    """A consumer of the Runtime's bus: an SQS queue behind a rule for one context's events."""
    assert local_runtime.stack is not None
    sqs, events, bus = local_runtime.aws.client("sqs"), local_runtime.aws.client("events"), local_runtime.stack.event_bus_name
    name = f"dup-{uuid.uuid4().hex[:12]}"
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def consume(context_id: str) -> Callable[[], list[dict[str, Any]]]:
        pattern = {"source": ["nylorun.runtime"], "detail": {"contextId": [context_id]}}
        events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps(pattern))
        events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "q", "Arn": arn}])

        def drain() -> list[dict[str, Any]]:
            got: list[dict[str, Any]] = []
            while batch := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
                got.extend(json.loads(m["Body"]) for m in batch)
                sqs.delete_message_batch(
                    QueueUrl=queue, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)]
                )
            return got

        return drain

    yield consume
    events.remove_targets(Rule=name, EventBusName=bus, Ids=["q"])
    events.delete_rule(Name=name, EventBusName=bus)
    sqs.delete_queue(QueueUrl=queue)


def test_a_stream_record_published_twice_gives_the_same_event_ids(
    local_runtime: LocalRuntime,
    invoke: Invoke,
    delivered: Callable[[str], list[dict[str, Any]]],
    bus_consumer: Callable[[str], Callable[[], list[dict[str, Any]]]],
) -> None:
    # Given a consumer of one context's events, and a task in it that completed
    context_id = f"ctx-{uuid.uuid4()}"
    drain = bus_consumer(context_id)
    task = rpc(local_runtime.agent_url("echo"), "SendMessage", {"message": user_message("publish", contextId=context_id)})["result"]["task"]
    seen: list[dict[str, Any]] = []
    poll(lambda: seen.extend(drain()) or seen, lambda got: any(e["detail-type"] == "Turn Usage" for e in got))
    seen.extend(drain())
    first_seen = {e["detail"]["eventId"]: e for e in seen}
    assert any(e["detail-type"] == "Turn Usage" for e in seen), "the task's events were published"
    ending = [
        r
        for r in delivered("PublishFunction")
        if (r["dynamodb"].get("NewImage") or {}).get("taskId", {}).get("S") == task["id"]
        and r["dynamodb"]["NewImage"]["SK"]["S"] == "TASK"
        and r["dynamodb"]["NewImage"]["state"]["S"] == "TASK_STATE_COMPLETED"
    ]
    assert ending, "the stream delivered the task's completion to the publish function"
    # When that stream record is delivered twice more
    published = []
    for _ in range(2):
        assert invoke("PublishFunction", {"Records": ending[:1]}) == {"batchItemFailures": []}
        published.append(drain())
    # Then both deliveries publish the same events, with the eventIds (and details) consumers already saw
    ids = [[e["detail"]["eventId"] for e in batch] for batch in published]
    assert ids[0] and ids[0] == ids[1]
    assert {e["detail-type"] for e in published[0]} >= {"Task Status Changed", "Turn Usage"}
    for event in published[0] + published[1]:
        assert event["detail"] == first_seen[event["detail"]["eventId"]]["detail"]


# ---------------------------------------------------------------------------------------------- sweep function
def test_sweeping_twice_removes_orphans_once_and_keeps_live_configs(local_runtime: LocalRuntime, invoke: Invoke) -> None:
    # Given a live task's push config, and a config whose task is gone
    assert local_runtime.runtime is not None
    echo = local_runtime.agent_url("echo")
    task = rpc(echo, "SendMessage", {"message": user_message("keep my config")})["result"]["task"]
    rpc(echo, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg-live", "url": "https://hooks.example.com/live"})
    orphan = f"gone-{uuid.uuid4()}"
    store = local_runtime.runtime.store
    store.put_push_config(
        orphan,
        StoredPushConfig(
            config=TaskPushNotificationConfig(id="x", task_id=orphan, url="https://hooks.example.com/x"), created_at=now_timestamp()
        ),
    )
    # When the daily sweep runs, and runs again
    schedule = {"action": "sweep"}  # the daily schedule's input (template.yaml)
    first = invoke("SweepFunction", schedule)
    second = invoke("SweepFunction", schedule)
    # Then the orphan went the first time, the second found nothing to remove, and the live config stayed
    assert first["removed"] >= 1 and second == {"removed": 0}
    assert store.get_push_config(orphan, "x") is None
    live = rpc(echo, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg-live"})
    assert live["result"]["url"] == "https://hooks.example.com/live"
