"""The locks the moto patches share, and the record of what each patch replaced (so a test can run moto without it)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

installing = threading.Lock()  # one patch (or the Lambda shim, or the direct transport) installed at a time
dynamodb_lock = threading.RLock()  # one DynamoDB request at a time (dynamodb_thread_safety.py)
sqs_lock = threading.RLock()  # one SQS queue operation at a time (sqs_serialized.py)
# moto's SQS operations that change a queue (receive_message apart: it waits for messages)
SQS_OPERATIONS = (
    "send_message", "send_message_batch", "delete_message", "delete_message_batch",
    "change_message_visibility", "change_message_visibility_batch", "purge_queue",
)  # fmt: skip

_replaced: dict[str, list[tuple[Any, str, Any]]] = {}  # patch module -> (owner, name, moto's own value)


def replace(patch: str, owner: Any, name: str, value: Any) -> Any:
    """Set `owner.name` to `value` for the patch module `patch`, keeping moto's own value: returned."""
    original = getattr(owner, name)
    _replaced.setdefault(patch, []).append((owner, name, vars(owner).get(name, original)))  # as stored: to restore
    setattr(owner, name, value)
    return original


def replaced(patch: str) -> list[tuple[Any, str, Any]]:
    """What the patch module `patch` replaced: (owner, name, moto's own value), in the order it did."""
    return list(_replaced.get(patch, ()))


def once(install: Callable[[], None]) -> Callable[[], None]:
    """An install function that runs once per process, under the install lock."""
    done = False

    @functools.wraps(install)
    def install_once() -> None:
        nonlocal done
        with installing:
            if not done:
                install()
                done = True

    return install_once
