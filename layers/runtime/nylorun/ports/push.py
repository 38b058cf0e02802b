"""The push ports: one delivery of one event to one push config, the queue that carries deliveries, the
HTTP sender that posts them, and the secrets that sign them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol


class AddressRefused(Exception):
    """The URL's host resolves only to addresses deliveries may not reach (SSRF protection)."""


@dataclass(frozen=True)
class HttpResult:
    status: int
    headers: dict[str, str]


@dataclass(frozen=True)
class Delivery:
    event_id: str
    task_id: str
    config_id: str
    kind: str  # "statusUpdate" | "artifactUpdate": the StreamResponse member it carries
    payload: dict[str, Any]
    first_attempt_at: float

    @property
    def webhook_id(self) -> str:
        # Standard Webhooks: the same id on every retry of one delivery, so receivers can drop duplicates.
        return "msg_" + hashlib.sha256(f"{self.event_id}\n{self.config_id}".encode()).hexdigest()[:32]

    @property
    def group(self) -> str:
        return hashlib.sha256(f"{self.task_id}\n{self.config_id}".encode()).hexdigest()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, body: str) -> Delivery:
        return cls(**json.loads(body))


class Sender(Protocol):
    def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout_seconds: float | None = None
    ) -> HttpResult:
        """One POST, all of it (connect, send, read) within `timeout_seconds` (None: the sender's deadline), else
        TimeoutError."""
        ...


class DeliveryQueue(Protocol):
    def send_deliveries(self, deliveries: Sequence[Delivery]) -> None:
        """Queue each delivery in its own group (task + config), several per call."""
        ...

    def send_fan_out(self, task_id: str, event_id: str, event: dict[str, Any]) -> None:
        """Queue an event's fan-out in its task's own group: one task's events keep their order, and a task
        with many configs holds up only its own."""
        ...

    def dead_letter(self, delivery: Delivery, reason: str) -> None: ...


class SigningSecrets(Protocol):
    """The Standard Webhooks secret(s) that sign a delivery now: one, or the new and the old while rotating (new
    first). Asked for every delivery; an implementation that caches says how long a rotated value takes to be used."""

    def __call__(self) -> list[str]: ...


# What a sealed value is for: its KMS encryption context, which each role's grant names (template.yaml), so the
# turn function (Agents' code) can seal task tokens but open nothing, and only the push function opens push
# credentials.
PUSH_CREDENTIAL = "push-credential"
TASK_TOKEN = "task-token"


class Sealer(Protocol):
    """Secrets at rest (push credentials, callback tokens): sealed before they are stored, opened where used.
    `about` (a task id) binds a sealed value to its task: it opens only for the same purpose and task."""

    def seal(self, plaintext: str, purpose: str, about: str) -> str: ...

    def open(self, stored: str, purpose: str, about: str) -> str:
        """The plaintext; a value stored unsealed (before sealing was on, or with no key) as it is."""
        ...
