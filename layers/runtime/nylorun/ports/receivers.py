"""The push receivers' shared state: each receiver's circuit breaker and each subject's delivery-time budget, kept
where every push function instance sees them (one item each, atomic conditional writes, expiring)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ReceiverState:
    """One receiver's breaker: consecutive failed attempts, and until when its deliveries are parked (epoch s)."""

    failures: int = 0
    open_until: float = 0.0


class ReceiverStates(Protocol):
    """Keys are keyed digests (a subject's receiver, a subject's budget), never a URL or a subject."""

    def receiver_state(self, receiver: str) -> ReceiverState | None: ...

    def receiver_failed(self, receiver: str, expires_at: int) -> int:
        """Count one more consecutive failure; the count now."""
        ...

    def open_receiver(self, receiver: str, until: float, expires_at: int) -> None:
        """Park the receiver's deliveries until `until` (never shortening a later one already set). The probe that
        failed is over: its claim ends with it, so the next probe comes when the parking ends, not at its lease."""
        ...

    def claim_probe(self, receiver: str, now: float, until: float) -> bool:
        """The one attempt at a receiver whose parking has ended: True for one caller until `until`."""
        ...

    def receiver_answered(self, receiver: str) -> None:
        """The receiver answered: its breaker closes (its item goes)."""
        ...

    def failed_attempts(self, delivery: str) -> int:
        """How many attempts of this delivery failed so far (its journal; a park is no attempt)."""
        ...

    def attempt_failed(self, delivery: str, expires_at: int) -> int:
        """Journal one more failed attempt of the delivery; the count now."""
        ...

    def reserve_budget(self, owner: str, window: int, seconds: float, budget: float, expires_at: int) -> bool:
        """Add `seconds` to what `owner`'s attempts reserved in `window`, in one atomic write, if the total stays
        within `budget`; False (and nothing changed) when it would not."""
        ...

    def refund_budget(self, owner: str, window: int, seconds: float, expires_at: int) -> None:
        """Give back `seconds` of a reservation in `window` that its attempt did not hold."""
        ...
