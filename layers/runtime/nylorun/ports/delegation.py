"""The port a turn delegates through: another A2A 1.0 Agent, spoken to as a client.

Messages and tasks cross it as A2A 1.0 wire JSON (ProtoJSON names), because that is what the other Agent
speaks and what the journal keeps: a replay reads back exactly what the delegate answered.
"""

from __future__ import annotations

from typing import Any, Protocol

from nylorun.limits import KIB, MAX_ANSWER_BYTES

# What a sealed delegation secret is for (the KMS encryption context names it, as for push credentials): the
# credentials the turn sends the delegate, and the keys that verify the delegate's signed callbacks.
DELEGATION = "delegation"


# The most of one delegate answer the client reads. Lambda: 6 MB response payload; a Nylorun delegate answers at
# most MAX_ANSWER_BYTES. A larger answer is not read into memory (`AnswerTooLarge`).
MAX_READ_BYTES = MAX_ANSWER_BYTES + 1024 * KIB

# Where a delegate's push deliveries for one delegation arrive: + /{task id}/{delegation key}.
CALLBACK_PATH = "/v1/a2a/delegations"


class CallbackRefused(Exception):
    """A delegate's callback that wakes nothing (service/delegation.py): `status` is the HTTP status to answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class DelegateUnavailable(Exception):
    """The delegate could not be reached or answered with an error. `code` is the JSON-RPC error code when it
    answered one (e.g. -32001 task not found), else None (network, HTTP status, not JSON)."""

    def __init__(self, reason: str, code: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


class AnswerTooLarge(DelegateUnavailable):
    """The delegate's answer was larger than the client reads (`MAX_READ_BYTES`)."""


class CallbackReplays(Protocol):
    """Which of a delegate's signed deliveries were taken already (Standard Webhooks `webhook-id`): a replayed one
    wakes nothing."""

    def first_delivery(self, task_id: str, delivery_id: str, expires_at: int) -> bool:
        """Remember the delivery for the task until `expires_at` (epoch seconds) in one conditional write; True when
        it was not remembered already (an expired one counts as not)."""
        ...


class Delegates(Protocol):
    """An A2A 1.0 client: every request carries `A2A-Version: 1.0`, activates the Nylorun profile's five
    extensions, and adds `headers` (the delegating Agent's credentials). Raises `DelegateUnavailable`."""

    def send(self, url: str, headers: dict[str, str], params: dict[str, Any]) -> dict[str, Any]:
        """SendMessage; the `SendMessageResponse` result (`{"task": …}` or `{"message": …}`)."""
        ...

    def get_task(self, url: str, headers: dict[str, str], task_id: str) -> dict[str, Any]: ...

    def find_tasks(self, url: str, headers: dict[str, str], context_id: str) -> list[dict[str, Any]]:
        """ListTasks filtered by context: what a lost send made, if anything."""
        ...

    def cancel(self, url: str, headers: dict[str, str], task_id: str) -> dict[str, Any]: ...

    def signing_keys(self, url: str, headers: dict[str, str]) -> list[str]:
        """The Standard Webhooks keys the delegate signs this caller's push deliveries with (a Nylorun Runtime's
        `push-signing-secrets`); empty when it offers none (then its callbacks cannot be verified: not asked for)."""
        ...
