"""Fair delivery workers: whether a push attempt may start now (its subject's delivery slot, its receiver's
breaker) and with which deadline, and what its outcome does to the receiver's breaker.

The bound (README "Push notifications"): an attempt runs only while it holds one of its subject's
`Settings.subject_slots` slots (shared by every push instance, a lease that ends by itself), and holds it at most
its deadline, so one subject's attempts hold at most subject_slots × 60 s of the push function's concurrency × 60 s
a minute (a tenth by default), whatever its receivers do. The breaker keeps a receiver that keeps failing from
using even that: its deliveries are parked without an attempt.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from nylorun.domain.ids import RUNTIME_KEY
from nylorun.observability import metrics
from nylorun.ports import ReceiverStates
from nylorun.settings import Settings

# A slot or probe is held past the attempt's deadline by this much: the time to sign, post and read the table
# around the request, so a live holder's lease never runs out under it.
LEASE_MARGIN_SECONDS = 5
# Breaker items outlive the longest retry window (Profile v2: 24 hours) by a day; TTL removes them after.
STATE_TTL_SECONDS = 2 * 24 * 3600


def receiver_key(subject: str, url: str) -> str:
    """A subject's receiver: its URL's origin, under the Runtime's key (a stored key names no subject or host), and
    per subject, so one subject's failures never park another subject's deliveries to the same host."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{(parts.hostname or '').lower()}:{parts.port or ''}"
    return RUNTIME_KEY.digest("push-receiver", f"{subject}\n{origin}")[:32]


def slots_key(subject: str) -> str:
    return RUNTIME_KEY.digest("push-slots", subject)[:32]


@dataclass(frozen=True)
class Admission:
    """An attempt may start (`deadline` s, holding `slot`), or the delivery is parked `park_seconds`."""

    subject: str
    receiver: str
    failures: int = 0  # the receiver's consecutive failures when admitted
    slot: int | None = None
    holder: str = ""
    deadline: float = 0.0
    park_seconds: int = 0
    reason: str = ""

    @property
    def parked(self) -> bool:
        return self.slot is None


class FairDelivery:
    def __init__(self, states: ReceiverStates, settings: Settings, clock: Callable[[], float]) -> None:
        self._states = states
        self._settings = settings
        self._now = clock
        self._held: dict[str, float] = {}  # subject's slots key -> attempt seconds held, in this process
        self._lock = threading.Lock()

    def attempt(self, delivery: str, received: int) -> int:
        """This attempt's number, from the delivery's journal of failed attempts, not SQS's receive count: that also
        counts parks (and batches whose time ran out), which are no attempts, and would lengthen the backoff and
        take the first attempt's short deadline away. A delivery received once has had none (nothing is read)."""
        return 1 if received <= 1 else self._states.failed_attempts(delivery) + 1

    def attempt_failed(self, delivery: str) -> None:
        """Journal a failed attempt (only failures are written: a delivered one needs no count)."""
        self._states.attempt_failed(delivery, int(self._now()) + STATE_TTL_SECONDS)

    def admit(self, subject: str, url: str, attempt: int) -> Admission:
        """Take a slot for one attempt, or say how long to park the delivery."""
        settings, now = self._settings, self._now()
        receiver = receiver_key(subject, url)
        state = self._states.receiver_state(receiver)
        failures = state.failures if state else 0
        if state and state.open_until > now:
            wait = int(state.open_until - now) + random.randint(1, settings.push_first_timeout_seconds)
            return Admission(subject, receiver, failures, park_seconds=wait, reason="receiver parked")
        probing = failures >= settings.push_breaker_failures
        # A delivery's first attempt, and the probe of a parked receiver: the shorter deadline.
        short = attempt <= 1 or probing
        deadline = float(min(settings.push_first_timeout_seconds if short else settings.push_timeout_seconds,
                             settings.push_timeout_seconds))  # fmt: skip
        until = now + deadline + LEASE_MARGIN_SECONDS
        if probing and not self._states.claim_probe(receiver, now, until):
            wait = random.randint(1, settings.push_first_timeout_seconds)
            return Admission(subject, receiver, failures, park_seconds=wait, reason="receiver probed")
        holder = uuid.uuid4().hex
        slot = self._states.take_delivery_slot(slots_key(subject), settings.subject_slots, holder, now, until)
        if slot is None:
            # Every slot of this subject is held: come back once one may be free.
            metrics.add_metric(name="PushSubjectSlotsFull", unit="Count", value=1)
            wait = random.randint(1, settings.push_first_timeout_seconds)
            return Admission(subject, receiver, failures, park_seconds=wait, reason="subject's slots full")
        return Admission(subject, receiver, failures, slot, holder, deadline)

    def settle(self, admission: Admission, answered: bool, held: float) -> None:
        """After the attempt: free the slot, count the time it held, and close or trip the receiver's breaker.
        `answered`: the receiver gave an answer it meant (2xx, 410, another 4xx); no answer, 429 and 5xx fail."""
        if admission.slot is None:
            return
        key = slots_key(admission.subject)
        self._states.free_delivery_slot(key, admission.slot, admission.holder)
        with self._lock:
            self._held[key] = self._held.get(key, 0.0) + held
        metrics.add_metric(name="PushHeldSeconds", unit="Seconds", value=held)
        if answered:
            if admission.failures:
                self._states.receiver_answered(admission.receiver)
            return
        now = self._now()
        expires = int(now) + STATE_TTL_SECONDS
        failures = self._states.receiver_failed(admission.receiver, expires)
        over = failures - self._settings.push_breaker_failures
        if over >= 0:
            settings = self._settings
            wait = min(settings.push_retry_max_seconds, settings.push_breaker_open_seconds * 2 ** min(over, 20))
            self._states.open_receiver(admission.receiver, now + wait, expires)
            metrics.add_metric(name="PushReceiverParked", unit="Count", value=1)

    def held_seconds(self, subject: str | None = None) -> float:
        """The attempt seconds this process's deliveries held: one subject's, or everyone's."""
        with self._lock:
            return self._held.get(slots_key(subject), 0.0) if subject is not None else float(sum(self._held.values()))
