"""Minimal reproductions of the moto 5.2.5 bugs the local stand-in patches (nylorun_local/moto/), to offer upstream.

Each test shows moto's own behaviour (the patch's replaced methods put back for the test) and the behaviour with the
patch. When a moto upgrade fixes a bug, its test fails with "moto fixed this: remove the patch": then delete the
patch module (and its line in nylorun_local/moto/__init__.py) and this test.
Each drives a fresh moto backend of its own: nothing here touches the local Runtime's tables or queues.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest
from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict
from moto.sqs.models import SQSBackend
from nylorun_local.moto import dynamodb_item_size, install_all, sqs_fifo_release
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
