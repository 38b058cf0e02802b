"""Every sample event in events/ drives its function's real handler, in-process, against the running local stack.

The api and turn samples are driven in test_handlers.py and test_local_aws.py; this drives the rest: dispatch
(an SQS FIFO record of the context queue), push (an SQS record holding an EventBridge event), publish (a DynamoDB
stream record) and sweep (the schedule's input). Each handler module is imported afresh under its own name, so
it builds its own runtime from the stack's environment (as a cold start does) and spying on it leaves the local
Runtime's own functions alone. Sample ids are replaced by fresh ones, so each run is about its own tasks.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import ALICE, rpc, user_message
from nylorun.engine import Agent, Skill, Turn
from nylorun.events import published_status
from nylorun.ports import Owner, StoredPushConfig
from nylorun.protocol.models import TaskPushNotificationConfig
from nylorun.service.scheduler import queue_group
from nylorun_local.lambda_shim import LambdaContext
from nylorun_local.runtime import LocalRuntime

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration

EVENTS = REPO_ROOT / "events"
SAMPLE_TASK = "00000000-0000-5000-8000-000000000000"
SAMPLE_CONTEXT = "00000000-0000-4000-8000-00000000c0de"
SAMPLE_QUEUED_TASK = "00000000-0000-5000-8000-000000000002"
# Which function each sample belongs to: the file name's first word is the function's folder.
FUNCTIONS = {"api", "turn", "dispatch", "push", "publish", "sweep"}


def sample(name: str, **ids: str) -> dict[str, Any]:
    """A sample event with its sample ids replaced (task=…, context=…, queued=…)."""
    text = (EVENTS / name).read_text()
    for key, value in ids.items():
        text = text.replace({"task": SAMPLE_TASK, "context": SAMPLE_CONTEXT, "queued": SAMPLE_QUEUED_TASK}[key], value)
    return dict(json.loads(text))


def fresh_handler(function: str) -> ModuleType:
    path = REPO_ROOT / "functions" / function / "app.py"
    spec = importlib.util.spec_from_file_location(f"nylorun_{function}_events_{uuid.uuid4().hex}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def invoke(module: ModuleType, event: dict[str, Any]) -> Any:
    return module.handler(event, LambdaContext(f"nylorun-events-{module.__name__}"))


def get_task(local_runtime: LocalRuntime, agent: str, task_id: str) -> dict[str, Any]:
    return dict(rpc(local_runtime.agent_url(agent), "GetTask", {"id": task_id})["result"])


def wait_state(local_runtime: LocalRuntime, agent: str, task_id: str, state: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    task = get_task(local_runtime, agent, task_id)
    while task["status"]["state"] != state and time.monotonic() < deadline:
        time.sleep(0.1)
        task = get_task(local_runtime, agent, task_id)
    return task


def completed_echo_task(local_runtime: LocalRuntime) -> dict[str, Any]:
    answer = rpc(local_runtime.agent_url("echo"), "SendMessage", {"message": user_message("for the samples")})
    task = dict(answer["result"]["task"])
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return task


# ---------------------------------------------------------------- every sample is driven somewhere
def test_every_function_has_a_sample_and_every_sample_is_driven_by_a_test() -> None:
    names = sorted(p.name for p in EVENTS.glob("*.json") if p.name != "env.json")  # env.json: sam local's variables
    # Every sample belongs to a function, every function has one
    assert {n.split("-", 1)[0] for n in names} == FUNCTIONS, names
    # And each is read by some test (this file, test_handlers.py, test_local_aws.py)
    tests_text = "".join(p.read_text() for p in (REPO_ROOT / "tests").rglob("test_*.py"))
    assert [n for n in names if n not in tests_text] == []


# ---------------------------------------------------------------- dispatch
@pytest.fixture(scope="module")
def dispatch(local_runtime: LocalRuntime) -> ModuleType:
    return fresh_handler("dispatch")  # after the local Runtime has put the stack's names in the environment


@pytest.fixture(scope="module")
def slow_agent(local_runtime: LocalRuntime) -> Iterator[tuple[str, threading.Event, threading.Event]]:
    release, started = threading.Event(), threading.Event()

    def run(turn: Turn) -> None:
        started.set()
        release.wait(60)
        turn.reply(f"done: {turn.text}")

    agent = Agent(name="t-events-slow", description="holds its context", skills=[Skill(id="t", name="t", description="t")])
    agent.turn(run)
    local_runtime.add_agent(agent)
    yield agent.name, release, started
    release.set()


def test_dispatch_sample_for_a_task_that_is_not_queued_lets_the_message_go(dispatch: ModuleType) -> None:
    # Given the sample context-queue record, naming a task that does not exist (nothing to start)
    event = sample("dispatch-sqs-fifo.json", queued=str(uuid.uuid4()))
    # When the dispatch handler runs it
    out = invoke(dispatch, event)
    # Then the message is done: no batch item failure, so Lambda deletes it
    assert out == {"batchItemFailures": []}


def test_dispatch_sample_holds_a_queued_turn_while_its_context_is_busy_then_lets_it_go(
    dispatch: ModuleType, slow_agent: tuple[str, threading.Event, threading.Event], local_runtime: LocalRuntime,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent, release, started = slow_agent
    url, context = local_runtime.agent_url(agent), str(uuid.uuid4())
    # Given a turn holding a context, and a second message queued behind it
    first = rpc(url, "SendMessage", {"message": user_message("one", contextId=context), "configuration": {"returnImmediately": True}})
    assert started.wait(20)
    second = rpc(url, "SendMessage", {"message": user_message("two", contextId=context), "configuration": {"returnImmediately": True}})
    queued = second["result"]["task"]
    assert queued["status"]["state"] == "TASK_STATE_SUBMITTED"
    # And the sample record for the queued task, in its context's message group
    event = sample("dispatch-sqs-fifo.json", queued=queued["id"])
    record = event["Records"][0]
    record["attributes"]["MessageGroupId"] = queue_group(Owner(subject="alice", agent=agent), context)
    waits: list[tuple[str, int]] = []
    monkeypatch.setattr(dispatch.runtime.queue, "retry_later", lambda handle, seconds: waits.append((handle, seconds)))

    # When the dispatch handler runs it while the first turn still holds the context
    out = invoke(dispatch, event)
    # Then the record is a batch item failure, and it is told to wait the backstop's pace before the next look
    assert out == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert waits == [(record["receiptHandle"], dispatch.runtime.settings.dispatch_retry_seconds)]

    # When the first turn ends (it starts the queued one itself), and the record comes again
    release.set()
    assert wait_state(local_runtime, agent, first["result"]["task"]["id"], "TASK_STATE_COMPLETED")["status"]["state"] == "TASK_STATE_COMPLETED"
    done = wait_state(local_runtime, agent, queued["id"], "TASK_STATE_COMPLETED")
    out = invoke(dispatch, event)
    # Then the queued turn ran once, and the message can go
    assert done["status"]["message"]["parts"] == [{"text": "done: two"}]
    assert out == {"batchItemFailures": []}
    assert len(waits) == 1


# ---------------------------------------------------------------- push
def test_push_sample_fans_an_eventbridge_event_out_to_the_tasks_push_configs(
    local_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a task with a push config made after it ended (so the live pipeline has nothing to send it)
    task = completed_echo_task(local_runtime)
    config = rpc(local_runtime.agent_url("echo"), "CreateTaskPushNotificationConfig",
                 {"taskId": task["id"], "url": "https://hooks.example.com/samples"}, token=ALICE)["result"]
    push = fresh_handler("push")
    sent: list[Any] = []
    moved: list[tuple[str, str, dict[str, Any]]] = []
    monkeypatch.setattr(push.runtime.push_queue, "send_deliveries", sent.extend)
    monkeypatch.setattr(push.runtime.push_queue, "send_fan_out", lambda *args: moved.append(args))
    # And the sample push-queue record: an EventBridge "Task Status Changed" (COMPLETED) about that task
    event = sample("push-sqs-eventbridge.json", task=task["id"], context=task["contextId"])
    bridge = json.loads(event["Records"][0]["body"])
    # carrying the task's own status, as the publish function sends it (the push function checks it against the table)
    assert local_runtime.runtime is not None
    head = local_runtime.runtime.store.head(task["id"])
    assert head is not None
    bridge["detail"]["statusUpdate"]["status"] = published_status(head["status"])
    event["Records"][0]["body"] = json.dumps(bridge)

    # When the push handler runs it (from the rule's one message group)
    out = invoke(push, event)
    # Then it moves the event into the task's own group, unchanged, and queues no delivery yet
    assert out == {"batchItemFailures": []}
    assert moved == [(task["id"], bridge["detail"]["eventId"], bridge)] and sent == []

    # When that moved message comes back to the push handler
    fan_out = copy.deepcopy(event)
    fan_out["Records"][0]["body"] = json.dumps({"fanOut": bridge})
    fan_out["Records"][0]["attributes"]["MessageGroupId"] = "fanout-task"
    out = invoke(push, fan_out)

    # Then one delivery per config is queued: the event's status update, under the event's id
    assert out == {"batchItemFailures": []}
    assert [(d.task_id, d.config_id, d.kind, d.event_id) for d in sent] == [
        (task["id"], config["id"], "statusUpdate", bridge["detail"]["eventId"])
    ]
    assert sent[0].payload == bridge["detail"]["statusUpdate"]
    # And the task having ended, its configs now expire (a config lives as long as its task)
    item = local_runtime.aws.client("dynamodb").get_item(
        TableName=local_runtime.runtime.settings.table_name,
        Key={"PK": {"S": f"PUSH#{task['id']}"}, "SK": {"S": f"CFG#{config['id']}"}},
    )["Item"]
    assert int(item["expiresAt"]["N"]) > time.time()


# ---------------------------------------------------------------- publish
@pytest.fixture()
def bus_listener(local_runtime: LocalRuntime) -> Iterator[Callable[[str], Callable[[int], list[dict[str, Any]]]]]:
    """A rule on the Runtime's bus to a queue of this test: `listen(task_id)` routes every event about that task
    there and returns `receive(n)`, which waits for n of them."""
    assert local_runtime.stack is not None
    sqs, events = local_runtime.aws.client("sqs"), local_runtime.aws.client("events")
    bus, name = local_runtime.stack.event_bus_name, f"samples-{uuid.uuid4().hex[:12]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def receive(want: int, timeout: float = 10) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
                got.append(json.loads(m["Body"]))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return got

    def listen(task_id: str) -> Callable[[int], list[dict[str, Any]]]:
        pattern = {"source": ["nylorun.runtime"], "detail": {"taskId": [task_id]}}
        events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps(pattern))
        events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "samples", "Arn": arn}])
        return receive

    yield listen
    events.remove_targets(Rule=name, EventBusName=bus, Ids=["samples"])
    events.delete_rule(Name=name, EventBusName=bus)
    sqs.delete_queue(QueueUrl=url)


def test_publish_sample_puts_the_status_change_on_the_bus(
    bus_listener: Callable[[str], Callable[[int], list[dict[str, Any]]]],
) -> None:
    # Given the sample stream record (a task item WORKING -> COMPLETED) about a fresh task id, and a listener
    task_id = str(uuid.uuid4())
    receive = bus_listener(task_id)
    event = sample("publish-dynamodb-stream.json", task=task_id, context=str(uuid.uuid4()))
    publish = fresh_handler("publish")
    # When the publish handler runs it
    out = invoke(publish, event)
    # Then no record failed, and the bus carried the status change
    assert out == {"batchItemFailures": []}
    events = receive(1)
    changed = next((e["detail"] for e in events if e["detail-type"] == "Task Status Changed"), None)
    assert changed is not None, events
    assert (changed["taskId"], changed["state"], changed["agent"]) == (task_id, "TASK_STATE_COMPLETED", "echo")
    assert changed["statusUpdate"]["status"]["message"]["parts"] == [{"text": "hello"}]
    # And publishing the same record again gives the same eventId (consumers drop the duplicate)
    time.sleep(0.5)
    receive(len(events) + 5, timeout=1)  # whatever else the first run published
    assert invoke(publish, event) == {"batchItemFailures": []}
    again = [e["detail"] for e in receive(1) if e["detail-type"] == "Task Status Changed"]
    assert again and again[0]["eventId"] == changed["eventId"]


# ---------------------------------------------------------------- sweep
def test_sweep_sample_removes_push_configs_whose_task_is_gone(local_runtime: LocalRuntime) -> None:
    assert local_runtime.runtime is not None
    store = local_runtime.runtime.store
    # Given a config whose task no longer exists, and a config of a task that does
    orphan = f"gone-{uuid.uuid4()}"
    store.put_push_config(
        orphan,
        StoredPushConfig(
            config=TaskPushNotificationConfig(id="c1", task_id=orphan, url="https://hooks.example.com/gone"),
            created_at="2026-01-01T00:00:00.000Z",
        ),
    )
    task = completed_echo_task(local_runtime)
    kept = rpc(local_runtime.agent_url("echo"), "CreateTaskPushNotificationConfig",
               {"taskId": task["id"], "url": "https://hooks.example.com/kept"})["result"]
    # When the sweep handler runs with the schedule's input
    out = invoke(fresh_handler("sweep"), sample("sweep-schedule.json"))
    # Then the orphan is gone, counted, and the live task's config stays
    assert out["removed"] >= 1
    assert store.get_push_config(orphan, "c1") is None
    assert store.get_push_config(task["id"], kept["id"]) is not None


def test_sweep_ttl_sample_keeps_a_task_that_has_not_expired(local_runtime: LocalRuntime) -> None:
    assert local_runtime.runtime is not None
    store = local_runtime.runtime.store
    # Given a completed task (it expires in 90 days) with a push config
    task = completed_echo_task(local_runtime)
    kept = rpc(local_runtime.agent_url("echo"), "CreateTaskPushNotificationConfig",
               {"taskId": task["id"], "url": "https://hooks.example.com/kept"})["result"]
    # When the sweep handler gets the sample TTL removal, rewritten to name it (a forged or stale record)
    event = sample("sweep-ttl-removal.json", task=task["id"], context=task["contextId"])
    out = invoke(fresh_handler("sweep"), event)
    # Then no record failed, and nothing of the task went: it has not expired
    assert out == {"batchItemFailures": []}
    record = store.get(task["id"])
    assert record is not None and record.history
    assert store.get_push_config(task["id"], kept["id"]) is not None
