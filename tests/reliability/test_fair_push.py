"""Fair and bounded delivery: each attack on it, refused or bounded (docs/architecture.md, "Fair push delivery").

* "One caller can stall push for everyone": one task's fan-out that cannot finish no longer holds up another
  subject's deliveries (each task fans out in its own message group); one caller's flood of events holds up no
  other caller's (the publish function queues each event in its task's group: no group is shared by tasks).
* "A push batch can outlive its function": a batch stops before the function's time is up and hands the rest
  back; a receiver dripping one byte at a time is cut at the request's overall deadline (push and url files).
* 3,000 url parts in one message: refused before anything is written; the url files of one message are
  fetched up to a total size only.

Numbers are small (1-4 s deadlines) so the suite stays fast; the only time assertions are upper bounds
("ended before the deadline plus slack"). Each test fails on the code before fair delivery (noted per test).
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import held_agent
from nylorun.adapters.sqs import SqsPushQueue
from nylorun.adapters.webhooks import WebhookSender
from nylorun.domain.ids import Owner
from nylorun.engine import Agent, Turn
from nylorun.engine.files import FileFetchFailed, FileService
from nylorun.events import STATUS_CHANGED
from nylorun.ports import StoredObject, StoredPushConfig
from nylorun.protocol.models import Message, Part, TaskPushNotificationConfig, now_timestamp
from nylorun.service.push import Delivery
from nylorun.settings import Settings
from nylorun_local.lambda_shim import LambdaContext
from nylorun_local.pollers import sqs_records
from nylorun_local.runtime import LocalRuntime
from reliability_kit import ALICE, BOB, Receiver, poll, rpc, user_message
from webhook_receiver import own_secrets

SLACK = 1.5  # seconds a bounded operation may overrun its deadline (thread start, scheduling on a busy machine)


# ---------------------------------------------------------------- peers that hold a connection
class SlowPeer:
    """A TCP server on loopback that reads each request, then answers as told: `drip` sends an HTTP answer one
    byte every `every` seconds (for at most `most` seconds, so code without a deadline still ends), `silent`
    never answers (until closed)."""

    def __init__(self, mode: str, every: float = 0.2, most: float = 12.0) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._mode, self._every, self._most = mode, every, most
        self._closed = threading.Event()
        self.connections = 0
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}/hook"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            if self._mode == "silent":
                self._closed.wait(self._most)
                return
            answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Drip: " + b"a" * 60 + b"\r\n\r\nok"
            started = time.monotonic()
            for byte in answer:
                if self._closed.is_set() or time.monotonic() - started > self._most:
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return  # the client gave up
                time.sleep(self._every)

    def close(self) -> None:
        self._closed.set()
        self._server.close()


@pytest.fixture()
def peers() -> Iterator[list[SlowPeer]]:
    made: list[SlowPeer] = []
    yield made
    for peer in made:
        peer.close()


# ---------------------------------------------------------------- the drip receiver
@pytest.mark.parametrize("method", ["post", "get"])
def test_a_peer_dripping_one_byte_at_a_time_is_cut_at_the_overall_deadline(method: str, peers: list[SlowPeer]) -> None:
    # Given a peer that answers one byte every 0.2 s (each read is quick: per-socket timeouts never fire), and
    # the sender pushes and fetches with a 1 s deadline
    peer = SlowPeer("drip")
    peers.append(peer)
    sender = WebhookSender(timeout_seconds=1, allow_loopback=True)
    # When a delivery is posted to it, or a url file fetched from it
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        if method == "post":
            sender.post(peer.url, b"{}", {"Content-Type": "application/json"})
        else:
            sender.get(peer.url, 1024)
    # Then the request ends at its deadline, not when the peer stops dripping (~13 s: before the overall deadline
    # it returned 200 then)
    assert time.monotonic() - started < 1 + SLACK


# ---------------------------------------------------------------- a batch outliving its function
def _slow_batch(
    local_runtime: LocalRuntime, peers: list[SlowPeer], monkeypatch: pytest.MonkeyPatch, configs: list[str],
    peer: SlowPeer, deadline: int,
) -> tuple[Any, list[dict[str, Any]], list[tuple[str, int]]]:
    """One delivery per entry of `configs` (a config named twice: two events, in its one message group), each to
    `peer` (closed after the test), with a delivery deadline of `deadline` seconds."""
    function = local_runtime._functions["PushFunction"]
    runtime = function.runtime
    monkeypatch.setattr(runtime.settings, "push_timeout_seconds", deadline)
    monkeypatch.setattr(runtime.http, "_timeout", float(deadline))
    peers.append(peer)
    task_id = f"batch-{uuid.uuid4()}"
    records = []
    for n, config_id in enumerate(configs):
        config = TaskPushNotificationConfig(id=config_id, task_id=task_id, url=peer.url)
        stored = StoredPushConfig(config=config, created_at=now_timestamp(), subject="alice")
        runtime.store.put_push_config(task_id, stored)
        delivery = Delivery(
            event_id=f"e{n}", task_id=task_id, config_id=config_id, kind="statusUpdate",
            payload={"taskId": task_id, "contextId": "ctx", "status": {"state": "TASK_STATE_WORKING"}},
            first_attempt_at=time.time(),
        )  # fmt: skip
        records.append(_record(f"m{n}", {"delivery": json.loads(delivery.to_json())}, delivery.group))
    held: list[tuple[str, int]] = []
    monkeypatch.setattr(runtime.push_queue, "retry_later", lambda handle, seconds: held.append((handle, seconds)))
    return function, records, held


def test_a_push_batch_stops_before_its_function_times_out_and_hands_the_rest_back(
    local_runtime: LocalRuntime, peers: list[SlowPeer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given ten deliveries in one message group (ten events for one config, kept in order), each answered slowly
    # (118 bytes, one every 5 ms: over half a second), a 2 s delivery deadline, and a push function with 8 s left
    # in this invocation (2 s of it kept in reserve)
    peer = SlowPeer("drip", every=0.005)
    function, records, held = _slow_batch(local_runtime, peers, monkeypatch, ["c0"] * 10, peer, deadline=2)

    # When the batch runs (as its own invocation: the Runtime's push poller waits meanwhile, as Lambda runs one
    # invocation at a time per environment and the handler module keeps this invocation's context)
    with local_runtime.paused("PushFunction"):
        started = time.monotonic()
        answer = function.handler({"Records": records}, LambdaContext("push", timeout_ms=8000))
        elapsed = time.monotonic() - started

    # Then it ended before the function's 8 s (one after another, the ten take 6 s and more)
    assert elapsed < 8, elapsed
    # And the ones it had no time for are the answer's failures, back on the queue at once (visibility 0) for the
    # next invocation, in order; the ones tried were delivered
    untried = {handle for handle, seconds in held if seconds == 0}
    failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
    assert untried and peer.connections + len(untried) == 10, (peer.connections, held)
    assert failed == {r["messageId"] for r in records[peer.connections :]}, (failed, peer.connections)


def test_a_push_batch_runs_its_message_groups_side_by_side(
    local_runtime: LocalRuntime, peers: list[SlowPeer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given ten deliveries, each to its own config (its own message group) at a receiver that never answers, with a
    # 1 s delivery deadline and 5 s left in the invocation
    peer = SlowPeer("silent", most=30)
    function, records, held = _slow_batch(
        local_runtime, peers, monkeypatch, [f"c{n}" for n in range(10)], peer, deadline=1
    )

    # When the batch runs
    with local_runtime.paused("PushFunction"):
        started = time.monotonic()
        answer = function.handler({"Records": records}, LambdaContext("push", timeout_ms=5000))
        elapsed = time.monotonic() - started

    # Then every group was tried at once, none waiting for another's receiver (one after another: three tried in
    # the invocation's time, seven handed back untried)
    assert peer.connections == 10 and elapsed < 5, (peer.connections, elapsed)
    # And each comes back later, as a delivery that timed out does
    assert sorted(f["itemIdentifier"] for f in answer["batchItemFailures"]) == sorted(r["messageId"] for r in records)
    assert len(held) == 10 and all(seconds > 0 for _, seconds in held), held


def test_a_slow_receiver_in_the_batch_holds_up_no_other_message_group(
    local_runtime: LocalRuntime, peers: list[SlowPeer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given, on the push queue in this order: an event in one message group that many tasks' events share (as an
    # earlier version's push rule queued them; the push function still hands those off), a delivery to another
    # subject's receiver that never answers (4 s deadline), a delivery of a third subject's config, then a second
    # event in the shared group and a second delivery for that config;
    # Lambda hands the first three to one invocation (the groups of the last two are locked while theirs are out)
    peer = SlowPeer("silent", most=30)
    function, (record,), _ = _slow_batch(local_runtime, peers, monkeypatch, ["c0"], peer, deadline=4)
    assert local_runtime.stack is not None
    sqs, url = local_runtime.aws.client("sqs"), local_runtime.stack.push_queue_url
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    bus = f"events-{uuid.uuid4()}"  # the rule's fixed group, named for this test alone

    def event(n: int) -> tuple[str, str]:
        task_id = f"no-configs-{uuid.uuid4()}"  # a task nobody is pushed: its hand-off has nothing to move
        status = {"taskId": task_id, "contextId": "ctx", "status": {"state": "TASK_STATE_WORKING"}}
        detail = {"taskId": task_id, "eventId": f"ev{n}", "state": "TASK_STATE_WORKING", "statusUpdate": status}
        return json.dumps({"detail-type": STATUS_CHANGED, "detail": detail}), bus

    def delivery(n: int, task_id: str) -> tuple[str, str]:
        # a config deleted meanwhile: dropped at once, as quick as a receiver that answers at once
        payload = {"taskId": task_id, "contextId": "ctx", "status": {"state": "TASK_STATE_WORKING"}}
        one = Delivery(event_id=f"e{n}", task_id=task_id, config_id="gone", kind="statusUpdate", payload=payload,
                       first_attempt_at=time.time())  # fmt: skip
        return json.dumps({"delivery": json.loads(one.to_json())}), one.group

    third = f"third-{uuid.uuid4()}"
    slow = (record["body"], record["attributes"]["MessageGroupId"])
    sent = [event(1), slow, delivery(1, third), event(2), delivery(2, third)]
    with local_runtime.paused("PushFunction"):
        for body, group in sent:
            sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=str(uuid.uuid4()))
        batch = _receive(sqs, url, {body for body, _ in sent[:3]})

        # When the invocation runs
        invocation = threading.Thread(
            target=function.handler, args=({"Records": sqs_records(batch, arn)}, LambdaContext("push", timeout_ms=20_000))
        )
        invocation.start()
        later: list[dict[str, Any]] = []
        try:
            # Then the second event and the config's second delivery are handed out while the invocation still waits
            # for that receiver (before, each group stayed locked until the whole batch had ended)
            later = _receive(sqs, url, {body for body, _ in sent[3:]}, until=invocation.is_alive)
            assert len(later) == 2 and invocation.is_alive(), [m["Body"][:40] for m in later]
        finally:
            invocation.join()
            for message in batch + later:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def _receive(sqs: Any, url: str, bodies: set[str], until: Callable[[], bool] = lambda: True) -> list[dict[str, Any]]:
    """Receive until the messages with these bodies are in hand (others are handed back at once), or `until()` is
    false, or 20 s have passed."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len(got) < len(bodies) and until() and time.monotonic() < deadline:
        answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0)
        for message in answer.get("Messages", []):
            if message["Body"] in bodies:
                got.append(message)
            else:
                sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
        time.sleep(0.05)
    return got


def _record(message_id: str, body: dict[str, Any], group: str) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "receiptHandle": f"rh-{message_id}",
        "body": json.dumps(body),
        "attributes": {"ApproximateReceiveCount": "1", "MessageGroupId": group, "SentTimestamp": "0"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:push.fifo",
        "awsRegion": "us-east-1",
    }


# ---------------------------------------------------------------- one caller stalling push for everyone
def test_a_fan_out_that_cannot_finish_holds_up_only_its_own_task(
    local_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given alice's task, whose fan-out fails every time (SQS refuses its deliveries: on AWS, a fan-out past the
    # function's timeout), and bob's push receiver
    alice_hook = Receiver(own_secrets(local_runtime.base_url, ALICE))
    bob_hook = Receiver(own_secrets(local_runtime.base_url, BOB))
    sqs = local_runtime._functions["PushFunction"].runtime.push_queue._sqs
    alice_config = f"alice-stall-{uuid.uuid4()}"
    refused: list[str] = []

    def refusing(call: Any) -> Any:
        def wrapped(**kwargs: Any) -> Any:
            bodies = [kwargs.get("MessageBody", "")] + [e["MessageBody"] for e in kwargs.get("Entries", [])]
            if any('"delivery"' in body and alice_config in body for body in bodies):
                refused.append(alice_config)
                raise ConnectionError("SQS is throttling this fan-out")
            return call(**kwargs)

        return wrapped

    for name in ("send_message", "send_message_batch"):
        monkeypatch.setattr(sqs, name, refusing(getattr(sqs, name)))
    try:
        url = local_runtime.agent_url("echo")
        alice = {"id": alice_config, "url": alice_hook.url}
        params = {"message": user_message("alice"), "configuration": {"taskPushNotificationConfig": alice}}
        rpc(url, "SendMessage", params, token=ALICE)
        deadline = time.monotonic() + 20
        while not refused and time.monotonic() < deadline:
            time.sleep(0.05)
        assert refused, "alice's fan-out was tried"

        # When bob's task runs, with its own push config
        bob = {"id": "bob-cfg", "url": bob_hook.url}
        params = {"message": user_message("bob"), "configuration": {"taskPushNotificationConfig": bob}}
        bob_task = rpc(url, "SendMessage", params, token=BOB)["result"]["task"]

        # Then bob's receiver gets its updates while alice's fan-out still fails (before fair delivery both events
        # shared one message group: bob's waited behind alice's for the queue's visibility timeout, 360 s)
        got = bob_hook.wait(2, timeout=20)
        assert [r["body"]["statusUpdate"]["taskId"] for r in got[:2]] == [bob_task["id"]] * 2
        assert all(r["verified"] for r in got)
        assert alice_hook.requests == []
    finally:
        alice_hook.close()
        bob_hook.close()


def test_a_fan_out_queues_its_deliveries_ten_per_call_each_in_its_own_group() -> None:
    # Given 25 deliveries of one event
    calls: list[dict[str, Any]] = []

    class Sqs:
        def send_message_batch(self, **kwargs: Any) -> dict[str, Any]:
            calls.append(kwargs)
            return {"Successful": [{"Id": e["Id"]} for e in kwargs["Entries"]]}

    deliveries = [
        Delivery(event_id="e1", task_id="t1", config_id=f"c{n}", kind="statusUpdate", payload={}, first_attempt_at=0)
        for n in range(25)
    ]
    # When they are queued
    SqsPushQueue(Sqs(), "queue", "dlq").send_deliveries(deliveries)
    # Then three SendMessageBatch calls carry them (10, 10, 5), each in the group of its config
    assert [len(c["Entries"]) for c in calls] == [10, 10, 5]
    entries = [e for c in calls for e in c["Entries"]]
    assert [e["MessageGroupId"] for e in entries] == [d.group for d in deliveries]
    assert len({e["MessageGroupId"] for e in entries}) == 25


# ---------------------------------------------------------------- url parts
def test_a_message_with_3000_url_parts_is_refused_and_nothing_is_written(local_runtime: LocalRuntime) -> None:
    # Given a message carrying 3,000 url file parts (each one a fetch of up to 10 MiB by the turn)
    parts = [{"url": f"https://files.example.com/{n}.txt", "mediaType": "text/plain"} for n in range(3000)]
    message = {**user_message("read these"), "parts": [{"text": "read these"}, *parts]}
    before = rpc(local_runtime.agent_url("echo"), "ListTasks", {}, token=BOB)["result"]["totalSize"]
    # When it is sent
    answer = rpc(local_runtime.agent_url("echo"), "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}, token=BOB)
    # Then it is refused, naming the limit (before the limit a task was made, to fetch all 3,000)
    assert answer.get("error", {}).get("code") == -32602, answer
    assert "url file parts" in answer["error"]["message"] and str(local_runtime.runtime.settings.max_url_parts) in answer["error"]["message"]
    # And no task was made
    assert rpc(local_runtime.agent_url("echo"), "ListTasks", {}, token=BOB)["result"]["totalSize"] == before


class _Files:
    """A fetcher serving `size` bytes for any url, and a bucket in memory."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.fetched: list[tuple[str, int]] = []
        self.kept: dict[str, bytes] = {}

    def get(self, url: str, max_bytes: int) -> tuple[bytes, str | None]:
        from nylorun.ports import FileTooLarge

        self.fetched.append((url, max_bytes))
        if self.size > max_bytes:
            raise FileTooLarge(str(self.size))
        return b"x" * self.size, "text/plain"

    def put(self, key: str, data: bytes, media_type: str) -> StoredObject:
        self.kept[key] = data
        return StoredObject(key=key, version_id="v1", size=len(data), sha256="")


def test_the_url_files_of_one_message_are_fetched_up_to_their_total_only() -> None:
    # Given a Runtime whose url files may add up to 25 bytes per message, and a message with five 10-byte files
    files = _Files(size=10)
    settings = Settings(max_url_bytes=25, max_file_bytes_in=10)
    service = FileService(files, settings, files)  # type: ignore[arg-type]
    parts = [Part(url=f"https://files.example.com/{n}.txt", media_type="text/plain") for n in range(5)]
    message = Message(message_id="m1", role="ROLE_USER", parts=parts)

    def fetch(index: int, part: Part, max_bytes: int) -> Any:
        return service.fetch(Owner("alice", "echo"), "ctx", "m1", index, part, max_bytes)

    # When the turn reads its files
    with pytest.raises(FileFetchFailed) as failed:
        service.handles(message, fetch)
    # Then the third file is fetched with only the 5 bytes left, is refused naming the total, and the rest are
    # never fetched (before the total limit all five were fetched and kept)
    assert [limit for _, limit in files.fetched] == [10, 10, 5]
    assert "25 bytes in all" in failed.value.reason
    assert len(files.kept) == 2


def test_a_fan_out_in_steps_keeps_each_configs_updates_in_order(local_runtime: LocalRuntime) -> None:
    # Given a task held in its turn, with 25 push configs on one receiver (fan-out steps of 10: three steps)
    hold = threading.Event()
    held_agent(local_runtime, "held-fair", hold)
    receiver = Receiver(own_secrets(local_runtime.base_url, ALICE))
    try:
        url = local_runtime.agent_url("held-fair")
        params = {"message": user_message("go"), "configuration": {"returnImmediately": True}}
        task = rpc(url, "SendMessage", params, token=ALICE)["result"]["task"]
        for n in range(25):
            config = {"taskId": task["id"], "id": f"c{n:02}", "url": receiver.url, "token": f"c{n:02}"}
            assert "result" in rpc(url, "CreateTaskPushNotificationConfig", config, token=ALICE)
        # When the task goes on: a WORKING update ("halfway"), then COMPLETED, each fanned out in three steps
        hold.set()
        def completed() -> int:
            return sum(1 for r in receiver.requests if r["body"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")

        poll(completed, lambda n: n >= 25, timeout=60)
        # Then every config got "halfway" and then COMPLETED, signed, once each (a config made while the task's
        # first WORKING update was still being fanned out may get that one too, before them)
        by_config: dict[str, list[str]] = {}
        for request in list(receiver.requests):
            by_config.setdefault(request["headers"]["X-A2A-Notification-Token"], []).append(
                _text(request) or _state(request)
            )
        assert all(r["verified"] for r in receiver.requests)
        assert {c: states[-2:] for c, states in by_config.items()} == {f"c{n:02}": ["halfway", "done"] for n in range(25)}
    finally:
        hold.set()
        receiver.close()


def test_one_callers_flood_of_events_holds_up_no_other_callers_push(local_runtime: LocalRuntime) -> None:
    # Given Alice's task, whose agent says 25 things in its turn (a status event each), and then Bob's ordinary task,
    # each with a push config, while the push function is paused (nothing handled, every event waiting)
    agent = Agent(name="chatty-fair", description="Says a lot in one turn.", skills=[])

    @agent.turn
    def run(turn: Turn) -> None:
        for n in range(25):
            turn.say(f"update {n}")
        turn.reply("done")

    local_runtime.add_agent(agent)
    assert local_runtime.stack is not None
    sqs, url = local_runtime.aws.client("sqs"), local_runtime.stack.push_queue_url
    alice, bob = Receiver(own_secrets(local_runtime.base_url, ALICE)), Receiver(own_secrets(local_runtime.base_url, BOB))
    taken: list[dict[str, Any]] = []
    try:
        with local_runtime.paused("PushFunction"):
            tasks = {}
            for token, receiver, agent_name in ((ALICE, alice, "chatty-fair"), (BOB, bob, "echo")):
                config = {"id": f"cfg-{uuid.uuid4()}", "url": receiver.url}
                params = {"message": user_message("go"), "configuration": {"taskPushNotificationConfig": config}}
                task = rpc(local_runtime.agent_url(agent_name), "SendMessage", params, token=token)["result"]["task"]
                assert task["status"]["state"] == "TASK_STATE_COMPLETED"
                tasks[token] = task["id"]

            # (Alice's 27 status events, WORKING then 25 said then COMPLETED, and Bob's 2 are published)
            poll(lambda: _queued(sqs, url), lambda n: n >= 29, timeout=30)
            # When the push function takes a batch: Alice's events come first (ten of her task's group)
            first = _receive_any(sqs, url, taken)
            assert first and all(tasks[ALICE] in m["Body"] for m in first), [m["Body"][:60] for m in first]
            # Then, while those ten are still being handled, Bob's events are handed out (before, every task's events
            # shared the push rule's one message group: Bob's waited behind all 27 of Alice's, in order)
            second = _receive_any(sqs, url, taken)
            assert any(tasks[BOB] in m["Body"] for m in second), [m["Body"][:60] for m in second]
            for message in taken:  # back to the push function, which handles them as usual
                sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
        # And every event still reaches its caller's receiver, in order
        said = poll(lambda: list(alice.requests), lambda r: any(_state(x) == "TASK_STATE_COMPLETED" for x in r), timeout=60)
        texts = [_text(r) for r in said if _state(r) == "TASK_STATE_WORKING" and _text(r)]
        assert texts == [f"update {n}" for n in range(25)]
        poll(lambda: list(bob.requests), lambda r: any(_state(x) == "TASK_STATE_COMPLETED" for x in r), timeout=60)
        assert all(r["verified"] for r in alice.requests + bob.requests)
    finally:
        alice.close()
        bob.close()


def _queued(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def _receive_any(sqs: Any, url: str, taken: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One receive (up to ten messages, kept in flight) that hands anything out; retried for up to 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
        if got:
            taken.extend(got)
            return list(got)
        time.sleep(0.05)
    return []


def _state(request: dict[str, Any]) -> str:
    return str(((request["body"].get("statusUpdate") or {}).get("status") or {}).get("state", ""))


def _text(request: dict[str, Any]) -> str:
    message = ((request["body"].get("statusUpdate") or {}).get("status") or {}).get("message") or {}
    return "".join(p.get("text", "") for p in message.get("parts", []))
