"""Minimal reproductions of the moto 5.2.5 bugs the local stand-in patches (nylorun_local/moto/), to offer upstream.

Each test shows moto's own behaviour (the patch's replaced methods put back for the test) and the behaviour with the
patch. When a moto upgrade fixes a bug, its test fails with "moto fixed this: remove the patch": then delete the
patch module (and its line in nylorun_local/moto/__init__.py) and this test.
Each drives a fresh moto backend of its own: nothing here touches the local Runtime's tables or queues.
A race is reproduced the same way every run: the second caller's request is made from inside the first operation,
at the point where moto lets it in (no sleep, no thread timing).
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest
from moto.core.request import Request
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict
from moto.dynamodb.responses import DynamoHandler
from moto.sqs.models import Queue, SQSBackend
from nylorun_local.moto import (
    dynamodb_item_size,
    dynamodb_thread_safety,
    dynamodb_transaction_snapshot,
    install_all,
    sqs_fifo_release,
    sqs_serialized,
)
from nylorun_local.moto.patching import replaced

ACCOUNT = "000000000042"  # not the local Runtime's: these backends are the tests' own


@pytest.fixture(autouse=True)
def patched() -> None:
    install_all()  # as `nylorun serve` runs moto


@contextmanager
def without(patch: ModuleType) -> Iterator[None]:
    """moto as it is without `patch`: the methods the patch replaced are moto's own while this runs."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        for owner, name, original in replaced(patch.__name__):
            monkeypatch.setattr(owner, name, original)
        yield


def fixed_upstream(patch: ModuleType) -> str:
    return f"moto fixed this: remove the patch {patch.__name__} (and this test)"


def replace_a_large_attribute(item: Any) -> str:
    """Replace a 300 KB attribute of an item with another 300 KB value: what DynamoDB accepts (400 KB limit)."""
    item["big"] = DynamoType({"S": "x" * 300_000})
    try:
        item["big"] = DynamoType({"S": "y" * 300_000})
    except Exception as exc:  # noqa: BLE001 - the refusal is what the test reports
        return type(exc).__name__
    return "accepted"


def test_an_update_replacing_a_large_attribute_is_limited_by_the_item_as_written() -> None:
    # Given moto without the patch: the replaced value counts against the limit too
    with without(dynamodb_item_size):
        unpatched = replace_a_large_attribute(LimitedSizeDict())
    assert unpatched == "ItemSizeTooLarge", fixed_upstream(dynamodb_item_size)
    # When the same update runs with the patch
    patched = replace_a_large_attribute(LimitedSizeDict())
    # Then the item as written (300 KB) is within the limit, as on DynamoDB
    assert patched == "accepted"


def receive_after_a_lapsed_visibility() -> list[str]:
    """A FIFO group of three messages; the first two received with a visibility timeout of 0 (back at once, unacked);
    then one more receive: SQS hands out the group's first message again."""
    sqs = SQSBackend("us-east-1", ACCOUNT)
    sqs.create_queue("g.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    for body in ("1", "2", "3"):
        sqs.send_message("g.fifo", body, group_id="g")
    sqs.receive_message("g.fifo", 2, 0, visibility_timeout=0)
    return [message.body for message in sqs.receive_message("g.fifo", 1, 0, visibility_timeout=30)]


def test_a_fifo_group_visible_again_is_received_from_its_first_message() -> None:
    # Given moto without the patch: it skips the first message and hands out the second
    with without(sqs_fifo_release):
        unpatched = receive_after_a_lapsed_visibility()
    assert unpatched == ["2"], fixed_upstream(sqs_fifo_release)
    # When the same receive runs with the patch
    patched = receive_after_a_lapsed_visibility()
    # Then the group starts again from its first message, in order
    assert patched == ["1"]


@contextmanager
def second_caller(patch: ModuleType, lock: str) -> Iterator[Callable[[Callable[[], Any]], Future[Any]]]:
    """`meanwhile(request)`, called from inside an operation, runs `request` on another thread, as a second caller
    would, and returns once it has run or is waiting for the patch's lock `lock` (whichever moto lets happen).
    Leaving the block waits for the second caller's request to finish."""
    settled = threading.Event()
    own = getattr(patch, lock)

    class WatchedLock:
        """The patch's lock as it is, that also says when a caller finds it taken."""

        def __enter__(self) -> None:
            if not own.acquire(blocking=False):
                settled.set()
                own.acquire()

        def __exit__(self, *exc_info: object) -> None:
            own.release()

    with ThreadPoolExecutor(max_workers=1) as pool, pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(patch, lock, WatchedLock())

        def meanwhile(request: Callable[[], Any]) -> Future[Any]:
            settled.clear()
            future = pool.submit(request)
            future.add_done_callback(lambda _: settled.set())
            assert settled.wait(timeout=60), "the second caller neither ran nor waited for the lock"
            return future

        yield meanwhile


def dynamodb(action: str, body: dict[str, Any]) -> dict[str, Any]:
    """One DynamoDB request through moto's request handler (as its server runs it), in the tests' own account.

    The handler, not the backend: the patch serializes the handler's requests."""
    request = Request.from_primitives(
        "POST",
        "https://dynamodb.us-east-1.amazonaws.com/",
        {"X-Amz-Target": f"DynamoDB_20120810.{action}", "Content-Type": "application/x-amz-json-1.0",
         "x-moto-account-id": ACCOUNT},
        json.dumps(body).encode(),
    )  # fmt: skip
    status, _, answer = DynamoHandler.dispatch(request)
    assert status == 200, answer
    return dict(json.loads(answer))


def put_during_a_transactions_copy() -> str:
    """A table holding item "a"; a TransactWriteItems writing it, and, while moto copies the table for the
    transaction's rollback (as it copies item "a"), a PutItem of item "b" from another caller. Returns what the
    transaction answers."""
    backend = dynamodb_backends[ACCOUNT]["us-east-1"]
    backend.reset()  # a fresh backend: nothing from an earlier run
    key = {"AttributeName": "k", "AttributeType": "S"}
    dynamodb("CreateTable", {"TableName": "t", "KeySchema": [{"AttributeName": "k", "KeyType": "HASH"}],
                             "AttributeDefinitions": [key], "BillingMode": "PAY_PER_REQUEST"})  # fmt: skip
    dynamodb("PutItem", {"TableName": "t", "Item": {"k": {"S": "a"}}})
    item = backend.tables["t"].items[DynamoType({"S": "a"})]
    with second_caller(dynamodb_thread_safety, "dynamodb_lock") as meanwhile:

        def copied_while_b_is_put(memo: dict[int, Any]) -> Any:
            del item.__deepcopy__  # once: the copy below is the item's own
            meanwhile(lambda: dynamodb("PutItem", {"TableName": "t", "Item": {"k": {"S": "b"}}}))
            return copy.deepcopy(item, memo)

        item.__deepcopy__ = copied_while_b_is_put
        write_a = {"Put": {"TableName": "t", "Item": {"k": {"S": "a"}, "n": {"N": "1"}}}}
        try:
            dynamodb("TransactWriteItems", {"TransactItems": [write_a]})
        except RuntimeError as exc:  # uncaught by moto's handler: its server answers 500
            return f"RuntimeError: {exc}"
    return "written"


def test_a_transaction_and_a_concurrent_put_both_succeed() -> None:
    # Given moto without the patch (nor the transaction snapshot, which skips the copy): the put breaks the copy
    with without(dynamodb_transaction_snapshot), without(dynamodb_thread_safety):
        unpatched = put_during_a_transactions_copy()
    broken = "RuntimeError: dictionary changed size during iteration"
    assert unpatched == broken, fixed_upstream(dynamodb_thread_safety)
    # When the same requests run with the patch (still without the snapshot: moto copies the whole table)
    with without(dynamodb_transaction_snapshot):
        patched = put_during_a_transactions_copy()
    # Then the put waits for the transaction, and both are written, as on DynamoDB
    assert patched == "written"
    written = dynamodb("Scan", {"TableName": "t"})["Items"]
    assert sorted(written, key=str) == [{"k": {"S": "a"}, "n": {"N": "1"}}, {"k": {"S": "b"}}]


def send_during_a_delete() -> list[str]:
    """A queue holding one received message; its delete, and, as moto assigns the queue's rebuilt list, a send from
    another caller. Returns what a receive then hands out."""
    sqs = SQSBackend("us-east-1", ACCOUNT)
    queue = sqs.create_queue("q")
    sqs.send_message("q", "deleted")
    [received] = sqs.receive_message("q", 1, 0, visibility_timeout=30)
    assign = Queue.__setattr__
    with second_caller(sqs_serialized, "sqs_lock") as meanwhile, pytest.MonkeyPatch.context() as monkeypatch:

        def rebuilt_while_sent(self: Any, name: str, value: Any) -> None:
            # delete's new list, made from the old one before the send
            if self is queue and name == "_messages":
                meanwhile(lambda: sqs.send_message("q", "sent meanwhile"))
            assign(self, name, value)

        monkeypatch.setattr(Queue, "__setattr__", rebuilt_while_sent)
        sqs.delete_message("q", received.receipt_handle)
    return [message.body for message in sqs.receive_message("q", 10, 0, visibility_timeout=30)]


def test_a_message_sent_during_a_delete_is_kept() -> None:
    # Given moto without the patch: the send appends to the list the delete then replaces
    with without(sqs_serialized):
        unpatched = send_during_a_delete()
    assert unpatched == [], fixed_upstream(sqs_serialized)
    # When the same requests run with the patch
    patched = send_during_a_delete()
    # Then the send waits for the delete, and its message is received, as on SQS
    assert patched == ["sent meanwhile"]


def receive_during_a_receive() -> tuple[list[str], list[str]]:
    """A FIFO group of two messages; a receive of one, and, once it has noted the groups in flight (none), a receive of
    one from another caller. Returns what each receive hands out: (the first's, the second's)."""
    sqs = SQSBackend("us-east-1", ACCOUNT)
    queue = sqs.create_queue("g.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    for body in ("1", "2"):
        sqs.send_message("g.fifo", body, group_id="g")
    visible = Queue.messages.fget
    reads = itertools.count()
    second: list[Future[Any]] = []
    with second_caller(sqs_serialized, "sqs_lock") as meanwhile, pytest.MonkeyPatch.context() as monkeypatch:

        def received_meanwhile(self: Any) -> Any:
            if self is queue and next(reads) == 0:  # the first receive's read (its groups in flight noted)
                second.append(meanwhile(lambda: sqs.receive_message("g.fifo", 1, 0, visibility_timeout=30)))
            return visible(self)

        monkeypatch.setattr(Queue, "messages", property(received_meanwhile))
        first = sqs.receive_message("g.fifo", 1, 0, visibility_timeout=30)
    return [message.body for message in first], [message.body for message in second[0].result()]


def test_two_receives_at_once_never_both_take_one_fifo_group() -> None:
    # Given moto without the patch: each receive takes a message of the group, out of order, both in flight at once
    with without(sqs_serialized):
        unpatched = receive_during_a_receive()
    assert unpatched == (["2"], ["1"]), fixed_upstream(sqs_serialized)
    # When the same receives run with the patch
    patched = receive_during_a_receive()
    # Then the second waits for the first, which takes the group: one receiver at a time, in order, as on SQS
    assert patched == (["1"], [])
