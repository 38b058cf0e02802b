"""Push delivery (service/push.py): what a receiver gets and what an operator finds in the dead-letter queue.
2xx delivers; 410 disables the config; other 4xx and 3xx are dead-lettered at once; 429, 5xx and network
errors are retried with jittered exponential backoff (Retry-After honoured) until 24 hours after the first
attempt, then dead-lettered. A fake clock, a fake sender and a fake queue: no HTTP, no SQS."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from email.utils import formatdate
from typing import Any

import pytest
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.adapters.webhooks import AddressRefused, HttpResult
from nylorun.domain.ids import Owner, derive_task_id
from nylorun.domain.signing import subject_secret
from nylorun.events import ARTIFACT_UPDATED, STATUS_CHANGED, TaskChanged, TaskImage, from_change
from nylorun.ports import NewTurn, StoredPushConfig
from nylorun.profile.extensions import INTERACTIONS
from nylorun.protocol.models import Artifact, Message, Part, TaskPushNotificationConfig, TaskState, TaskStatus
from nylorun.service import push as push_module
from nylorun.service.push import Delivery, Outcome, PushService
from nylorun.settings import Settings
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from unit_support import OWNER, message

SECRET = "whsec_" + "dW5pdC10ZXN0LXNlY3JldC1mb3Itbnlsb3J1bi0zMg=="
DAY = 24 * 3600
T0 = 1_800_000_000.0  # the first attempt (a fixed instant: the clock is ours)
STATUS = {"taskId": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}


class Receiver:
    """The sender: answers each POST with the next scripted response (an HttpResult, or an exception to raise)."""

    def __init__(self, *answers: HttpResult | Exception) -> None:
        self.answers = list(answers)
        self.posts: list[tuple[str, bytes, dict[str, str]]] = []

    def post(self, url: str, body: bytes, headers: dict[str, str], timeout_seconds: float | None = None) -> HttpResult:
        self.posts.append((url, body, headers))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


class Queue:
    def __init__(self) -> None:
        self.sent: list[Delivery] = []
        self.dead: list[tuple[Delivery, str]] = []

    def send_deliveries(self, deliveries: Sequence[Delivery]) -> None:
        self.sent.extend(deliveries)

    def send_fan_out(self, task_id: str, event_id: str, event: dict[str, Any]) -> None:
        raise AssertionError("the service hands off only in the push function")

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        self.dead.append((delivery, reason))


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def http(status: int, **headers: str) -> HttpResult:
    return HttpResult(status=status, headers=headers)


def push_setup(
    *answers: HttpResult | Exception, clock: Clock | None = None, **settings: Any
) -> tuple[PushService, InMemoryTaskStore, Receiver, Queue]:
    """A task t1 with one push config `cfg` (core tier), and the service that delivers to it."""
    config_settings = Settings(push_secret=SECRET, **settings)
    # The store keeps the same quotas as the settings (a test of many configs on one task raises the per-task one).
    store = InMemoryTaskStore(quotas=config_settings.quotas, retention_seconds=config_settings.retention)
    receiver, queue = Receiver(*answers), Queue()
    config = TaskPushNotificationConfig(id="cfg", task_id="t1", url="https://receiver.example/hook", token="tok-1")
    store.put_push_config("t1", StoredPushConfig(config=config, created_at="2026-01-01T00:00:00Z", subject="alice"))
    service = PushService(store, receiver, queue, config_settings, lambda: [SECRET],
                          clock=clock or Clock())
    return service, store, receiver, queue


def _message() -> Message:
    return Message.model_validate({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]})


def delivery(payload: dict[str, Any] = STATUS, event_id: str = "ev-1") -> Delivery:
    return Delivery(event_id=event_id, task_id="t1", config_id="cfg", kind="statusUpdate", payload=payload,
                    first_attempt_at=T0)


def test_a_2xx_delivers_a_signed_status_update_the_receiver_can_verify() -> None:
    # Given a receiver that accepts (its clock and ours agree: the signature carries the time)
    service, _, receiver, queue = push_setup(http(204), clock=Clock(time.time()))
    # When one status change is delivered
    result = service.deliver(delivery(), attempt=1)
    # Then it is delivered once, signed with the config's subject's key, with the config's token
    assert result.outcome == Outcome.DELIVERED and queue.dead == []
    url, body, headers = receiver.posts[0]
    assert url == "https://receiver.example/hook" and headers["X-A2A-Notification-Token"] == "tok-1"
    assert Webhook(subject_secret(SECRET, "alice")).verify(body, headers) == {"statusUpdate": STATUS}
    # And not with the Runtime secret itself, which no receiver holds
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(body, headers)


def test_a_config_stored_without_its_subject_is_signed_with_its_tasks_owner_key() -> None:
    # Given a config stored before subjects were kept with configs, on bob's task
    service, store, receiver, _ = push_setup(http(204), clock=Clock(time.time()))
    config = TaskPushNotificationConfig(id="cfg", task_id="t1", url="https://receiver.example/hook")
    store.put_push_config("t1", StoredPushConfig(config=config, created_at="2026-01-01T00:00:00Z"))
    store.create_turn(NewTurn(owner=Owner(subject="bob", agent="echo"), context_id="c1", message=_message()))
    task_id = derive_task_id(Owner(subject="bob", agent="echo"), "c1", 1)
    store.put_push_config(task_id, StoredPushConfig(config=config.model_copy(update={"task_id": task_id}),
                                                    created_at="2026-01-01T00:00:00Z"))
    # When a delivery for it goes out
    old = Delivery(event_id="ev-1", task_id=task_id, config_id="cfg", kind="statusUpdate", payload=STATUS,
                   first_attempt_at=T0)
    assert service.deliver(old, attempt=1).outcome == Outcome.DELIVERED
    # Then bob's key (the task's owner, read from the table) verifies it
    _, body, headers = receiver.posts[0]
    assert Webhook(subject_secret(SECRET, "bob")).verify(body, headers) == {"statusUpdate": STATUS}
    # And a config whose task and subject are both unknown is dropped, never signed with a guessed key
    assert service.deliver(delivery(), attempt=1).outcome == Outcome.DROPPED


def test_a_delivery_keeps_its_webhook_id_across_retries_so_receivers_can_drop_duplicates() -> None:
    # Given a receiver that fails once, then accepts
    service, _, receiver, _ = push_setup(http(503), http(200))
    # When the delivery is tried twice, and another event is delivered
    outcomes = [service.deliver(delivery(), attempt=1).outcome, service.deliver(delivery(), attempt=2).outcome]
    service.deliver(delivery(event_id="ev-2"), attempt=1)
    # Then both tries carry one webhook-id, and the other event another
    ids = [headers["webhook-id"] for _, _, headers in receiver.posts]
    assert outcomes == [Outcome.RETRY, Outcome.DELIVERED]
    assert ids[0] == ids[1] != ids[2]


def test_a_receiver_sees_only_the_extensions_the_config_creator_activated() -> None:
    # Given a status message carrying interactions/v1 data, and a config made by a core-tier caller
    service, _, receiver, _ = push_setup(http(200))
    message = {"messageId": "a1", "role": "ROLE_AGENT", "parts": [{"text": "Approve?"}],
               "metadata": {INTERACTIONS: {"interactionId": "ia-1"}}, "extensions": [INTERACTIONS]}
    payload = {**STATUS, "status": {"state": "TASK_STATE_AUTH_REQUIRED", "message": message}}
    # When it is delivered
    service.deliver(delivery(payload), attempt=1)
    # Then the receiver gets the text, not the extension data
    sent = json.loads(receiver.posts[0][1])["statusUpdate"]["status"]["message"]
    assert sent["parts"] == [{"text": "Approve?"}] and "metadata" not in sent and "extensions" not in sent


def test_410_gone_removes_the_config_and_later_deliveries_to_it_are_dropped() -> None:
    # Given a receiver that is gone for good
    service, store, receiver, queue = push_setup(http(410))
    # When a delivery gets 410, and another event follows
    first = service.deliver(delivery(), attempt=1)
    later = service.deliver(delivery(event_id="ev-2"), attempt=1)
    # Then the config is removed (not dead-lettered), and nothing more is posted to it
    assert (first.outcome, later.outcome) == (Outcome.DISABLED, Outcome.DROPPED)
    assert store.list_push_configs("t1") == [] and queue.dead == []
    assert len(receiver.posts) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 301, 302, 307])
def test_other_4xx_and_3xx_are_dead_lettered_at_once_and_the_config_stays(status: int) -> None:
    # Given a receiver that refuses (or redirects, which is never followed)
    service, store, receiver, queue = push_setup(http(status, location="https://elsewhere.example/"))
    # When a delivery gets that answer
    result = service.deliver(delivery(), attempt=1)
    # Then it is dead-lettered with the status as reason, after one post; the config is kept
    assert result.outcome == Outcome.GAVE_UP
    assert [(d.event_id, reason) for d, reason in queue.dead] == [("ev-1", f"HTTP {status}")]
    assert len(receiver.posts) == 1 and len(store.list_push_configs("t1")) == 1


@pytest.mark.parametrize(
    "failure", [http(429), http(500), http(502), http(503), ConnectionError("reset"), TimeoutError("slow")]
)
def test_429_5xx_and_network_errors_are_retried_not_dead_lettered(failure: HttpResult | Exception) -> None:
    service, _, _, queue = push_setup(failure)
    result = service.deliver(delivery(), attempt=1)
    assert result.outcome == Outcome.RETRY and result.delay_seconds >= 1 and queue.dead == []


def test_an_address_the_runtime_may_not_reach_is_dead_lettered_without_retries() -> None:
    service, _, _, queue = push_setup(AddressRefused("10.0.0.1 is private"))
    assert service.deliver(delivery(), attempt=1).outcome == Outcome.GAVE_UP
    assert queue.dead[0][1].startswith("refused")


def test_retry_after_in_seconds_is_honoured() -> None:
    # Given a receiver asking to wait 2 minutes (more than the first backoff, 30 s at most)
    service, _, _, _ = push_setup(http(503, **{"retry-after": "120"}))
    # Then the next attempt waits 2 minutes
    assert service.deliver(delivery(), attempt=1).delay_seconds == 120


def test_retry_after_as_an_http_date_is_honoured() -> None:
    service, _, _, _ = push_setup(http(429, **{"retry-after": formatdate(T0 + 600, usegmt=True)}))
    assert service.deliver(delivery(), attempt=1).delay_seconds == 600


def test_retry_after_never_holds_a_delivery_longer_than_the_queue_can() -> None:
    # SQS keeps a message out of sight at most 12 hours
    service, _, _, _ = push_setup(http(503, **{"retry-after": str(3 * DAY)}))
    assert service.deliver(delivery(), attempt=1).delay_seconds == 12 * 3600


@pytest.mark.parametrize(("jitter", "delays"), [
    ("high", [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]),
    ("low", [15, 30, 60, 120, 240, 480, 960, 1800, 1800]),
])
def test_backoff_doubles_per_attempt_up_to_the_cap_with_jitter_between_half_and_all_of_it(
    monkeypatch: pytest.MonkeyPatch, jitter: str, delays: list[int]
) -> None:
    # Given the jitter at its bound, and the default base (30 s) and cap (1 h) (one delivery's own backoff: its
    # receiver's breaker, which would park it after three failures at this unmoving clock, out of the way)
    monkeypatch.setattr(push_module.random, "uniform", lambda low, high: high if jitter == "high" else low)
    service, _, _, _ = push_setup(http(503), push_breaker_failures=1000)
    # When attempts 1..9 fail
    # Then each waits base * 2^(attempt-1), capped, times the jitter
    assert [service.deliver(delivery(), attempt=n).delay_seconds for n in range(1, 10)] == delays


def test_jitter_spreads_retries_of_one_attempt_within_its_bounds() -> None:
    service, _, _, _ = push_setup(http(503), push_breaker_failures=1000)
    # Each a delivery's third attempt (its own journal: two failed before)
    delays = set()
    for n in range(200):
        for attempt in (1, 2, 3):
            result = service.deliver(delivery(event_id=f"ev-{n}"), attempt=attempt)
        delays.add(result.delay_seconds)
    assert delays <= set(range(60, 121)) and len(delays) > 10


@pytest.mark.parametrize("failure", [http(503), http(429, **{"retry-after": "60"}), ConnectionError("down")])
def test_retries_last_24_hours_after_the_first_attempt_then_the_delivery_is_dead_lettered(
    failure: HttpResult | Exception,
) -> None:
    # Given a receiver that keeps failing
    clock = Clock()
    service, _, _, queue = push_setup(failure, clock=clock)
    # When it still fails one second before 24 hours have passed since the first attempt
    clock.now = T0 + DAY - 1
    # Then it is retried
    assert service.deliver(delivery(), attempt=40).outcome == Outcome.RETRY and queue.dead == []
    # And when it fails at 24 hours, it is dead-lettered, saying why
    clock.now = T0 + DAY
    assert service.deliver(delivery(), attempt=41).outcome == Outcome.GAVE_UP
    assert len(queue.dead) == 1 and queue.dead[0][1].startswith("still failing after the retry window")


def a_task_with_configs(store: InMemoryTaskStore, *config_ids: str) -> str:
    """A task in the store with push configs: fan-out checks every event against the table."""
    record, _ = store.create_turn(NewTurn(owner=OWNER, context_id="c1", message=message("hi")))
    for n, config_id in enumerate(config_ids):
        config = TaskPushNotificationConfig(id=config_id, task_id=record.task_id, url=f"https://{config_id}.example/hook")
        store.put_push_config(record.task_id, StoredPushConfig(config=config, created_at=f"2026-01-01T00:00:{n:02}Z"))
    return record.task_id


def status_event(store: InMemoryTaskStore, task_id: str, state: TaskState | None = None) -> dict[str, Any]:
    """Move the task to `state` (if given), then the status event the publish function makes of its item."""
    if state is not None:
        store.set_status(task_id, TaskStatus(state=state), expect=set(TaskState))
    head = store.head(task_id)
    assert head is not None
    (event,) = [e for e in from_change(TaskChanged(new=TaskImage.from_head(head))) if e.detail_type == STATUS_CHANGED]
    return {"detail-type": event.detail_type, "detail": event.detail}


def test_fan_out_makes_one_delivery_per_config_and_none_for_the_submitted_status() -> None:
    # Given a task with two push configs
    service, store, _, queue = push_setup(http(200))
    task_id = a_task_with_configs(store, "cfg", "cfg-2")
    # When the task is submitted (its creator has it already), then starts working
    counts = [service.fan_out(status_event(store, task_id)).queued,
              service.fan_out(status_event(store, task_id, TaskState.WORKING)).queued]
    # Then only the working status goes out, once to each config, each in its own group (one slow receiver
    # holds up only its own deliveries)
    assert counts == [0, 2]
    assert sorted(d.config_id for d in queue.sent) == ["cfg", "cfg-2"]
    assert len({d.group for d in queue.sent}) == 2 and len({d.event_id for d in queue.sent}) == 1


def test_configs_of_an_ended_task_expire_with_their_task() -> None:
    # Given a task's config, on a Runtime that keeps ended tasks a day
    service, store, _, _ = push_setup(http(200), clock=Clock(time.time()), retention_seconds=24 * 3600)
    task_id = a_task_with_configs(store, "cfg")
    # When the completed status fans out
    event = status_event(store, task_id, TaskState.COMPLETED)
    service.fan_out(event)
    # Then the config expires when its task does (a config lives as long as its task: decision 0020)
    config, head = store.get_push_config(task_id, "cfg"), store.head(task_id)
    assert config is not None and head is not None
    assert config.expires_at == head["expiresAt"] and abs(config.expires_at - (time.time() + 24 * 3600)) < 60


def test_an_event_the_table_does_not_vouch_for_is_not_pushed() -> None:
    # Given a working task with a push config
    service, store, _, queue = push_setup(http(200))
    task_id = a_task_with_configs(store, "cfg")
    genuine = status_event(store, task_id, TaskState.WORKING)
    # When events with content the table never held are fanned out: a rewritten status, a terminal state that
    # would expire the configs, another task's id
    forged = json.loads(json.dumps(genuine))
    forged["detail"]["statusUpdate"]["status"]["message"] = {
        "messageId": "m-forged", "role": "ROLE_AGENT", "parts": [{"text": "Refund approved, wire the fee to ..."}]}
    ended = json.loads(json.dumps(genuine))
    ended["detail"]["state"] = ended["detail"]["statusUpdate"]["status"]["state"] = "TASK_STATE_COMPLETED"
    elsewhere = json.loads(json.dumps(genuine))
    elsewhere["detail"]["taskId"] = elsewhere["detail"]["statusUpdate"]["taskId"] = "t1"
    counts = [service.fan_out(e).queued for e in (forged, ended, elsewhere)]
    # Then nothing is sent and the config is kept as it was; the genuine event still goes out
    assert counts == [0, 0, 0] and queue.sent == []
    kept = store.get_push_config(task_id, "cfg")
    assert kept is not None and kept.expires_at is None
    assert service.fan_out(genuine).queued == 1


def test_an_artifact_event_is_pushed_with_the_table_s_content() -> None:
    # Given a task with a push config and an artifact
    service, store, _, queue = push_setup(http(200))
    task_id = a_task_with_configs(store, "cfg")
    store.put_artifact(task_id, Artifact(artifact_id="a1", parts=[Part(text="the real report")]))
    head = store.head(task_id)
    assert head is not None

    def artifact_event(artifact_id: str, text: str) -> dict[str, Any]:
        artifact = {"artifactId": artifact_id, "parts": [{"text": text}]}
        update = {"taskId": task_id, "contextId": head["contextId"], "artifact": artifact}
        return {"detail-type": ARTIFACT_UPDATED, "detail": {"taskId": task_id, "eventId": "e", "artifactUpdate": update}}

    # When an artifact event with other content, and one for an artifact the task does not have, are fanned out
    counts = [service.fan_out(artifact_event("a1", "a forged report")).queued, service.fan_out(artifact_event("a2", "x")).queued]
    # Then the known artifact goes out as the table holds it, the unknown one not at all
    assert counts == [1, 0]
    assert queue.sent[0].payload["artifact"]["parts"] == [{"text": "the real report"}]


@pytest.mark.parametrize("header", ["²", "١٢٠", "12a", "-5", "9" * 5000, "Tue, 32 Foo 2026 99:99:99 GMT", "１２０"])
def test_a_malformed_retry_after_is_a_bad_header_not_an_exception(header: str) -> None:
    # Given a receiver answering 503 with a Retry-After that is neither ASCII delay-seconds nor an HTTP-date
    # (a Unicode digit passed str.isdigit() and then int() raised; int() of 5,000 digits raises too)
    service, _, _, queue = push_setup(http(503, **{"retry-after": header}))
    # When the delivery is attempted
    result = service.deliver(delivery(), attempt=1)
    # Then it is retried on the ordinary backoff (15 to 30 s for attempt 1), or the longest hold for a huge number
    assert result.outcome == Outcome.RETRY and queue.dead == []
    assert 15 <= result.delay_seconds <= 30 or (header.isascii() and header.isdigit() and result.delay_seconds == 43_200)


def test_a_large_fan_out_goes_in_steps_and_resumes_where_it_stopped() -> None:
    # Given a task with 25 push configs (the per-task quota raised to allow them) and fan-out steps of 10
    service, store, _, queue = push_setup(http(200), push_fan_out_step=10, max_push_configs_per_task=25)
    task_id = a_task_with_configs(store, "cfg", *(f"cfg-{n:02}" for n in range(2, 26)))
    event = status_event(store, task_id, TaskState.WORKING)
    event_id = str(event["detail"]["eventId"])
    # When the event is fanned out, then comes back (received again) until done, one config deleted meanwhile
    steps = [service.fan_out(event)]
    store.delete_push_config(task_id, "cfg-25")
    while not steps[-1].done:
        steps.append(service.fan_out(event, resumed=True))
    # Then it took three steps (10, 10, 4), each config got the event once, in the order of their ids
    assert [(s.queued, s.done) for s in steps] == [(10, False), (10, False), (4, True)]
    assert [d.config_id for d in queue.sent] == ["cfg"] + [f"cfg-{n:02}" for n in range(2, 25)]
    # And the cursor is gone: a later delivery of the same event (a duplicate) starts over, SQS drops its repeats
    assert store.fan_out_cursor(task_id, event_id) is None
