"""Fair delivery workers: a subject whose receivers time out or refuse holds at most a bounded share of the push
function's delivery capacity, whatever it does (docs/architecture.md#fair-push-delivery).

The primary figure is counted, not timed: a clock only the test moves (`VirtualTime`) runs minutes of the push
function's work, each worker thread one message group in flight; a receiver that never answers holds its attempt for
the deadline the push service gave it, and the attempts' held seconds in every minute are added up against the
configured concurrency × 60 s. No HTTP, no SQS, no moto: the in-memory store keeps the receivers' state and each
subject's budget as the table does.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.ports import HttpResult, StoredPushConfig
from nylorun.protocol.models import TaskPushNotificationConfig
from nylorun.service.fairness import budget_key
from nylorun.service.push import Delivery, Outcome, PushService
from nylorun.settings import Settings

SECRET = "whsec_" + "dW5pdC10ZXN0LXNlY3JldC1mb3Itbnlsb3J1bi0zMg=="
T0 = 1_800_000_000.0
MINUTE = 60.0
# The template's PushMaxConcurrency default; each push instance runs up to ten message groups side by side.
CONCURRENCY = 20
GROUPS_PER_INSTANCE = 10
BOUND = 1 / 10  # the share of CONCURRENCY × 60 s one subject's failing receivers may hold (docs/calling/push.md)


class VirtualTime:
    """A clock only the test moves. Each worker thread sleeps on it; once every live worker sleeps, time jumps to
    the earliest wake-up. Nothing waits on the machine's clock."""

    def __init__(self, start: float) -> None:
        self.now = start
        self._cond = threading.Condition()
        self._sleepers: dict[int, float] = {}
        self._tokens = itertools.count()
        self._live = 0

    def __call__(self) -> float:
        return self.now

    def enter(self, workers: int) -> None:
        with self._cond:
            self._live += workers

    def leave(self) -> None:
        with self._cond:
            self._live -= 1
            self._cond.notify_all()

    def sleep_until(self, at: float) -> None:
        with self._cond:
            token = next(self._tokens)
            self._sleepers[token] = at
            self._cond.notify_all()
            self._cond.wait_for(lambda: token not in self._sleepers)

    def run_until(self, end: float) -> None:
        """Move time on whenever every worker sleeps, up to `end`; then wake all and wait for them to leave."""
        with self._cond:
            while True:
                self._cond.wait_for(lambda: len(self._sleepers) >= self._live)
                if self._live == 0:
                    return
                self.now = min(max(self.now, min(self._sleepers.values())), end)
                for token, at in list(self._sleepers.items()):
                    if at <= self.now or self.now >= end:
                        del self._sleepers[token]
                self._cond.notify_all()


@dataclass(order=True)
class Queued:
    visible_at: float
    n: int
    delivery: Delivery = field(compare=False)
    receives: int = field(default=0, compare=False)


class PushQueue:
    """The push queue as the worker threads see it: each delivery in its own message group (one message each),
    hidden while received, back after the delay a retry asked for; the receive count is the attempt number. With a
    `fan_out_step`, the deliveries arrive as a fan-out queues them: ten (one SendMessageBatch) every that many s."""

    def __init__(self, deliveries: Sequence[Delivery], fan_out_step: float = 0.0) -> None:
        self._heap = [Queued(T0 + n // 10 * fan_out_step, n, d) for n, d in enumerate(deliveries)]
        self._lock = threading.Lock()
        self.dead: list[tuple[Delivery, str]] = []
        self.delivered: list[Delivery] = []

    def take(self, now: float) -> Queued | None:
        with self._lock:
            if not self._heap or self._heap[0].visible_at > now:
                return None
            item = heapq.heappop(self._heap)
            item.receives += 1
            return item

    def back(self, item: Queued, at: float) -> None:
        with self._lock:
            item.visible_at = at
            heapq.heappush(self._heap, item)

    def next_visible(self, now: float) -> float:
        """When an idle worker next finds a message: as soon as one is visible (SQS's long polling)."""
        with self._lock:
            return self._heap[0].visible_at if self._heap else now + MINUTE

    # the DeliveryQueue port, for the service
    def send_deliveries(self, deliveries: Sequence[Delivery]) -> None:
        raise AssertionError("no fan-out here")

    def send_fan_out(self, task_id: str, event_id: str, event: dict[str, Any]) -> None:
        raise AssertionError("no fan-out here")

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        self.dead.append((delivery, reason))


class Receiver:
    """Receivers that answer after `answer_after` seconds, or never (None): an attempt holds its worker that long, or
    until the deadline it was given (else the sender's, 10 s) and then times out. Records each attempt's (start, end)
    inside the run."""

    def __init__(self, clock: VirtualTime, end: float, answer_after: float | None = None) -> None:
        self._clock, self._end, self._after = clock, end, answer_after
        self._default = float(Settings.model_fields["push_timeout_seconds"].default)
        self.held: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout_seconds: float | None = None
    ) -> HttpResult:
        started = self._clock.now
        deadline = timeout_seconds or self._default
        hold = deadline if self._after is None else min(self._after, deadline)
        self._clock.sleep_until(started + hold)
        with self._lock:
            self.held.append((started, min(self._clock.now, self._end)))
        if self._after is None or self._clock.now < started + self._after:
            raise TimeoutError("no answer")
        return HttpResult(status=204, headers={})

    def most_held_in_any_minute(self) -> float:
        """The most attempt seconds held inside any minute [t, t + 60) of the run: the sum is piecewise linear in t,
        so its highest is where a minute starts at an attempt's start or ends at an attempt's end."""
        starts = [s for s, _ in self.held] + [e - MINUTE for _, e in self.held]
        return max((sum(max(0.0, min(e, t + MINUTE) - max(s, t)) for s, e in self.held) for t in starts), default=0.0)


def alice_pushes(urls: Sequence[str], tasks: int = 10) -> tuple[InMemoryTaskStore, list[Delivery]]:
    """Alice's `tasks` tasks × 10 configs (the per-task quota), config n aimed at `urls[n % len(urls)]`, and one
    delivery per config (a status of each task)."""
    store = InMemoryTaskStore()
    deliveries = []
    for t in range(tasks):
        task_id = f"task-{t}"
        status = {"taskId": task_id, "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}
        for c in range(10):
            url = urls[(t * 10 + c) % len(urls)]
            config = TaskPushNotificationConfig(id=f"cfg-{c}", task_id=task_id, url=url)
            store.put_push_config(task_id, StoredPushConfig(config=config, created_at="2026-01-01T00:00:00Z",
                                                            subject="alice"))
            deliveries.append(Delivery(event_id="ev-1", task_id=task_id, config_id=f"cfg-{c}", kind="statusUpdate",
                                       payload=status, first_attempt_at=T0))
    return store, deliveries


def run_push_function(push: PushService, queue: PushQueue, clock: VirtualTime, until: float) -> list[float]:
    """The push function at its configured concurrency, each instance running ten message groups side by side, until
    `until` on the virtual clock; when each delivery was delivered."""
    delivered: list[float] = []

    def worker() -> None:
        try:
            while clock.now < until:
                item = queue.take(clock.now)
                if item is None:
                    clock.sleep_until(queue.next_visible(clock.now))
                    continue
                result = push.deliver(item.delivery, item.receives)
                if result.outcome is Outcome.RETRY:
                    queue.back(item, clock.now + max(1, result.delay_seconds))
                elif result.outcome is Outcome.DELIVERED:
                    delivered.append(clock.now)
        finally:
            clock.leave()

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(CONCURRENCY * GROUPS_PER_INSTANCE)]
    clock.enter(len(workers))
    for thread in workers:
        thread.start()
    clock.run_until(until)
    for thread in workers:
        thread.join()
    return delivered


@pytest.mark.parametrize("hosts", [1, 100], ids=["one-black-hole", "a-black-hole-per-config"])
def test_one_subjects_black_holes_hold_at_most_a_tenth_of_the_push_functions_capacity_in_any_minute(
    hosts: int,
) -> None:
    # Given alice's 100 configs aimed at receivers that never answer (one host, or a host of its own each)
    urls = [f"https://hole-{n}.example/hook" for n in range(hosts)]
    store, deliveries = alice_pushes(urls)
    clock, end = VirtualTime(T0), T0 + 3 * MINUTE
    settings = Settings(push_secret=SECRET)
    sender = Receiver(clock, end)
    queue = PushQueue(deliveries)
    push = PushService(store, sender, queue, settings, lambda: [SECRET], clock=clock)

    # When the push function works for three minutes (its budget windows' edges fall anywhere in them)
    run_push_function(push, queue, clock, end)

    # Then in no minute did alice's attempts hold more than a tenth of its capacity (concurrency × 60 s), counted
    # attempt by attempt (before fair delivery: every worker waited on her receivers the whole minute, 10 × it)
    most = sender.most_held_in_any_minute()
    assert 0 < most <= BOUND * CONCURRENCY * MINUTE, (most, len(sender.held))
    # And the push function's own accounting says the same
    assert push.held_seconds() == pytest.approx(sum(e - s for s, e in sender.held), abs=1e-6)
    # And none of her deliveries was dropped for it: each waits for its receiver (24 h), none dead-lettered
    assert queue.dead == []


def test_one_subjects_fan_out_to_a_receiver_that_answers_at_once_is_not_held_to_a_tenth_of_the_workers() -> None:
    # Given alice's 1,000 configs (100 tasks × 10) aimed at a receiver that answers in 20 ms, their deliveries
    # queued by the fan-out ten at a time, a step every 0.1 s (10 s for all of them)
    store, deliveries = alice_pushes(["https://fast.example/hook"], tasks=100)
    clock, end = VirtualTime(T0), T0 + MINUTE
    sender = Receiver(clock, end, answer_after=0.02)
    queue = PushQueue(deliveries, fan_out_step=0.1)
    push = PushService(store, sender, queue, Settings(push_secret=SECRET), lambda: [SECRET], clock=clock)

    # When the push function works on them for a minute
    delivered = run_push_function(push, queue, clock, end)

    # Then all 1,000 arrive within 30 s of the push function's time (about 15 s): each costs her budget the 20 ms it
    # held (before, capped at two in flight, those that found both taken parked 1-5 s: the last arrived after 53 s)
    assert len(delivered) == 1000 and max(delivered) - T0 <= 30, (len(delivered), max(delivered, default=0) - T0)
    # And together they held 20 s, less than a tenth of a minute's capacity
    assert sum(e - s for s, e in sender.held) == pytest.approx(20.0)
    assert queue.dead == []


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A receiver: each POST gets the next answer (the last one repeats); records each POST's URL and deadline."""

    def __init__(self, *answers: HttpResult | Exception) -> None:
        self.answers = list(answers)
        self.posts: list[tuple[str, float | None]] = []

    def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout_seconds: float | None = None
    ) -> HttpResult:
        self.posts.append((url, timeout_seconds))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def one_config_each(
    sender: Scripted, clock: Clock, url: str, store: InMemoryTaskStore | None = None, **settings: Any
) -> tuple[PushService, dict[str, Delivery]]:
    """Alice's and bob's tasks, each with one config aimed at `url`, and one delivery of each."""
    store = store or InMemoryTaskStore()
    deliveries = {}
    for subject in ("alice", "bob"):
        task_id = f"task-{subject}"
        config = TaskPushNotificationConfig(id="cfg", task_id=task_id, url=url)
        store.put_push_config(task_id, StoredPushConfig(config=config, created_at="2026-01-01T00:00:00Z",
                                                        subject=subject))
        status = {"taskId": task_id, "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}
        deliveries[subject] = Delivery(event_id="ev-1", task_id=task_id, config_id="cfg", kind="statusUpdate",
                                       payload=status, first_attempt_at=T0)
    push = PushService(store, sender, PushQueue([]), Settings(push_secret=SECRET, **settings), lambda: [SECRET], clock=clock)
    return push, deliveries


def test_a_receiver_that_keeps_failing_is_parked_without_attempts_then_probed_once() -> None:
    # Given alice's receiver that never answers, and bob's config at the same host
    clock, sender = Clock(), Scripted(TimeoutError("no answer"))
    push, delivery = one_config_each(sender, clock, "https://down.example/hook")
    # When alice's delivery fails three times in a row
    for attempt in (1, 2, 3):
        assert push.deliver(delivery["alice"], attempt).outcome is Outcome.RETRY
    assert len(sender.posts) == 3
    # Then her next delivery there is parked, without an attempt, for the breaker's first period (30 s) at least
    parked = push.deliver(delivery["alice"], 4)
    assert parked.outcome is Outcome.RETRY and parked.delay_seconds >= 30 and len(sender.posts) == 3, parked
    # And bob's delivery to the same host is still attempted: one subject's failures park no other subject's
    push.deliver(delivery["bob"], 1)
    assert len(sender.posts) == 4
    # When the period is over and the receiver answers again
    clock.now += parked.delay_seconds
    sender.answers = [HttpResult(status=204, headers={})]
    # Then one probe goes out, with the shorter deadline, and its answer closes the breaker
    assert push.deliver(delivery["alice"], 5).outcome is Outcome.DELIVERED
    assert sender.posts[-1][1] == 5
    assert push.deliver(delivery["alice"], 6).outcome is Outcome.DELIVERED and len(sender.posts) == 6


def test_a_deliverys_first_attempt_has_the_shorter_deadline_and_its_retries_the_full_one() -> None:
    # Given a receiver that answers slowly once (no answer within the deadline), then answers
    clock, sender = Clock(), Scripted(TimeoutError("no answer"), HttpResult(status=204, headers={}))
    push, delivery = one_config_each(sender, clock, "https://slow.example/hook")
    # When alice's delivery is attempted, then retried
    assert push.deliver(delivery["alice"], 1).outcome is Outcome.RETRY
    assert push.deliver(delivery["alice"], 2).outcome is Outcome.DELIVERED
    # Then the first attempt had 5 s, the retry 10 s (docs/calling/push.md#delivery-and-retries: the defaults)
    assert [deadline for _, deadline in sender.posts] == [5, 10]


def test_parks_are_no_attempts_the_first_attempt_after_them_keeps_its_short_deadline_and_the_base_backoff() -> None:
    # Given alice's budget for this window all reserved by her other attempts, and her receiver that never answers
    clock, sender = Clock(), Scripted(TimeoutError("no answer"))
    store, settings = InMemoryTaskStore(), Settings(push_secret=SECRET)
    push, delivery = one_config_each(sender, clock, "https://slow.example/hook", store)
    window, budget = int(clock.now // settings.subject_budget_window), settings.subject_budget
    assert store.reserve_budget(budget_key("alice"), window, budget, budget, int(T0) + 3600)
    # When her delivery comes back from the queue three times and finds no budget left each time (parked)
    for received in (1, 2, 3):
        assert push.deliver(delivery["alice"], received).outcome is Outcome.RETRY
    assert sender.posts == []
    # And those attempts answered at once (their reservations refunded) when SQS hands it over the fourth time, and
    # the attempt times out
    store.refund_budget(budget_key("alice"), window, budget, int(T0) + 3600)
    retry = push.deliver(delivery["alice"], 4)
    # Then that was its first attempt: the 5 s deadline, and the base backoff (30 s, jittered to 15-30 s), not the
    # fourth attempt's 10 s and 120-240 s
    assert sender.posts == [("https://slow.example/hook", 5)]
    assert retry.outcome is Outcome.RETRY and 15 <= retry.delay_seconds <= 30, retry


@pytest.mark.parametrize(
    ("share", "concurrency", "budget"),
    [("10", "20", 60.0), ("10", "1000", 3000.0), ("100", "20", 600.0), ("10", "2", 10.0)],
    ids=["default", "most-concurrency", "opted-out", "at-least-one-deadline"],
)
def test_a_subjects_budget_is_half_its_share_of_a_minutes_capacity_per_window_of_a_minute_and_a_deadline(
    monkeypatch: pytest.MonkeyPatch, share: str, concurrency: str, budget: float
) -> None:
    # Given the push function's environment as the template sets it (PushSubjectShare, PushMaxConcurrency)
    monkeypatch.setenv("NYLORUN_PUSH_SUBJECT_SHARE", share)
    monkeypatch.setenv("NYLORUN_PUSH_CONCURRENCY", concurrency)
    monkeypatch.setenv("NYLORUN_PUSH_SECRET", SECRET)
    # When the settings are read
    settings = Settings.from_env()
    # Then a subject may reserve half its share of concurrency × 60 s per window (any minute meets two windows'
    # attempts), never less than one attempt's longest deadline (10 s), in windows of 60 s + that deadline
    assert (settings.subject_budget, settings.subject_budget_window) == (budget, 70)
