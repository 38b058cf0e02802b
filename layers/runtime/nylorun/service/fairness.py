"""Fair delivery workers: whether a push attempt may start now (its subject's delivery-time budget, its receiver's
breaker) and with which deadline, and what its outcome does to that budget and the receiver's breaker.

The bound (docs/architecture.md#fair-push-delivery): before an attempt, its whole deadline is reserved from
its subject's budget for the current window (`Settings.subject_budget` seconds per
`Settings.subject_budget_window`, shared by every push instance, one atomic write); after it, the part it did
not hold is given back (a crashed instance's reservation stays spent). An attempt that holds time in a given
minute started at most one deadline before it, so within one window's span, which meets at most two windows:
one subject's attempts hold at most 2 × subject_budget, its share of the push function's concurrency × 60 s,
in any minute, whatever its receivers do. A receiver that answers at once costs milliseconds of it; one that
never answers, its whole deadline. The breaker keeps a receiver that keeps failing from using even that: its
deliveries are parked without an attempt.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from nylorun.domain.ids import RUNTIME_KEY
from nylorun.observability import metrics
from nylorun.ports import ReceiverStates
from nylorun.settings import Settings

# A probe is claimed past the attempt's deadline by this much: the time to sign, post and write the table around
# the request, so a live prober's claim never runs out under it.
LEASE_MARGIN_SECONDS = 5
# Breaker items outlive the longest retry window (Profile v2: 24 hours) by a day; TTL removes them after.
STATE_TTL_SECONDS = 2 * 24 * 3600
# A budget window's item is read by nobody once its window is over; TTL removes it an hour later.
BUDGET_TTL_SECONDS = 3600


def receiver_key(subject: str, url: str) -> str:
    """A subject's receiver: its URL's origin, under the Runtime's key (a stored key names no subject or host), and
    per subject, so one subject's failures never park another subject's deliveries to the same host."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{(parts.hostname or '').lower()}:{parts.port or ''}"
    return RUNTIME_KEY.digest("push-receiver", f"{subject}\n{origin}")[:32]


def budget_key(subject: str) -> str:
    return RUNTIME_KEY.digest("push-budget", subject)[:32]


@dataclass(frozen=True)
class Admission:
    """An attempt may start (`deadline` s, reserved from its subject's budget in `window`), or the delivery is parked
    `park_seconds`."""

    subject: str
    receiver: str
    failures: int = 0  # the receiver's consecutive failures when admitted
    window: int = 0
    deadline: float = 0.0
    park_seconds: int = 0
    reason: str = ""

    @property
    def parked(self) -> bool:
        return self.deadline <= 0


class FairDelivery:
    def __init__(self, states: ReceiverStates, settings: Settings, clock: Callable[[], float]) -> None:
        self._states = states
        self._settings = settings
        self._now = clock
        self._held: dict[str, float] = {}  # subject's budget key -> attempt seconds held, in this process
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
        """Reserve one attempt's deadline from its subject's budget, or say how long to park the delivery."""
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
        window = int(now // settings.subject_budget_window)
        budget = settings.subject_budget
        if not self._states.reserve_budget(budget_key(subject), window, deadline, budget, self._expiry(window)):
            # The subject's budget for this window is reserved: come back once a fast attempt may have refunded some.
            metrics.add_metric(name="PushSubjectBudgetSpent", unit="Count", value=1)
            wait = random.randint(1, settings.push_first_timeout_seconds)
            return Admission(subject, receiver, failures, park_seconds=wait, reason="subject's delivery budget spent")
        return Admission(subject, receiver, failures, window, deadline)

    def settle(self, admission: Admission, answered: bool, held: float) -> None:
        """After the attempt: refund the budget it did not hold, count the time it held, and close or trip the
        receiver's breaker. `answered`: the receiver gave an answer it meant (2xx, 410, another 4xx); no answer, 429
        and 5xx fail."""
        if admission.parked:
            return
        key = budget_key(admission.subject)
        # Whole milliseconds, rounded down: a refund never gives back more than the attempt left unused.
        unused = math.floor(max(0.0, admission.deadline - held) * 1000) / 1000
        if unused > 0:
            self._states.refund_budget(key, admission.window, unused, self._expiry(admission.window))
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
            return self._held.get(budget_key(subject), 0.0) if subject is not None else float(sum(self._held.values()))

    def _expiry(self, window: int) -> int:
        return (window + 1) * self._settings.subject_budget_window + BUDGET_TTL_SECONDS
