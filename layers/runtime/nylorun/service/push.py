"""Push notifications (docs/protocol.md §8; Profile v2, docs/profile.md §5: "delivered at least once, signed
with Standard Webhooks, to hosts the Runtime allows. Retries last up to 24 hours").

Three steps, one queue (SQS FIFO):
* hand-off, in the publish function (`hand_off`): an event whose task has push configs is queued in its task's
  own message group, one message; an event of a task without configs is not queued at all. No message group is
  shared by tasks, so no task's events (however many) hold up another task's (docs/architecture.md);
* fan-out, in the task's group (its events keep their order): one delivery per push config, queued ten per
  SQS call, `push_fan_out_step` at a time: the event is then handed back and stays first in its group (a
  cursor in the table says how far it got), so 1,000 configs of one task take turns with other tasks'
  deliveries instead of queueing 1,000 ahead of them;
* deliver: one POST of one A2A StreamResponse to one config. Each delivery has its own message group
  (task + config), so a dead endpoint holds up only its own later deliveries (kept in order), never
  another endpoint's. Retries back off with jitter (honouring Retry-After) until `push_max_age_seconds`
  after the first attempt; then the delivery is dead-lettered.
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import Enum
from typing import Any

from pydantic import ValidationError
from standardwebhooks.webhooks import Webhook

from nylorun.engine.files import FileService
from nylorun.events import ARTIFACT_UPDATED, MAX_DETAIL_BYTES, STATUS_CHANGED, status_digest
from nylorun.observability import logger, metrics
from nylorun.ports import (
    PUSH_CREDENTIAL,
    AddressRefused,
    Delivery,
    DeliveryQueue,
    Sealer,
    Sender,
    SigningSecrets,
    StoredPushConfig,
    TaskStore,
)
from nylorun.profile.extensions import visible
from nylorun.protocol.models import StreamResponse, TaskState
from nylorun.service.fairness import FairDelivery
from nylorun.service.signing import PushSigningKeys
from nylorun.settings import Settings


class Outcome(Enum):
    DELIVERED = "delivered"
    RETRY = "retry"
    GAVE_UP = "gave_up"
    DISABLED = "disabled"
    DROPPED = "dropped"  # the config is gone: nothing to do


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    delay_seconds: int = 0
    reason: str = ""


@dataclass(frozen=True)
class FanOut:
    queued: int
    done: bool  # False: more configs are left for the next step


def sign(secrets: list[str], msg_id: str, timestamp: datetime, body: str) -> str:
    """`webhook-signature`: one `v1,…` per secret, space-separated (Standard Webhooks), so receivers holding
    either the old or the new key verify during a rotation."""
    return " ".join(Webhook(secret).sign(msg_id, timestamp, body) for secret in secrets)


_DELAY_SECONDS = re.compile(r"[0-9]+")  # RFC 9110 §10.2.3: delay-seconds = 1*DIGIT, ASCII digits only
_FOREVER = 10**12  # longer than any wait the queue keeps; int() of thousands of digits would raise


def retry_after_seconds(value: str | None, now: float) -> int:
    """RFC 9110 §10.2.3 `Retry-After`: ASCII delay-seconds or an HTTP-date; anything else (`²`, `١٢`, a
    malformed date) is a bad header, read as no wait asked for."""
    value = (value or "").strip()
    if _DELAY_SECONDS.fullmatch(value):
        return int(value) if len(value) <= 12 else _FOREVER
    if not value.isascii():
        return 0
    try:
        return max(0, int(parsedate_to_datetime(value).timestamp() - now))
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0


def pushed_member(event: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The StreamResponse member an event pushes and its payload, or None for events nobody is pushed."""
    detail_type, detail = event.get("detail-type"), event.get("detail") or {}
    if detail_type == STATUS_CHANGED:
        if detail.get("state") == TaskState.SUBMITTED.value:
            return None  # the creator already has the task from its SendMessage answer
        return "statusUpdate", detail["statusUpdate"]
    if detail_type == ARTIFACT_UPDATED:
        return "artifactUpdate", detail["artifactUpdate"]
    return None


def hand_off(store: TaskStore, queue: DeliveryQueue, event: dict[str, Any], configs: int | None = None) -> bool:
    """Queue an event (`detail-type`, `detail`: as on the bus) in its task's own message group, when the task has
    anything to fan out to. True when it was queued. `configs`: the task's count of push configs as the change that
    made the event showed it; None (not known: a task item from before the count was kept) reads the table."""
    detail = event.get("detail") or {}
    if pushed_member(event) is None:
        return False
    # The count is the task item's own: a status event carries it in the same write, so a config added before that
    # write is counted and one added after it (which the event predates) is not. No read for a task without configs.
    if configs is not None and configs <= 0:
        return False
    if configs is None and not store.push_configs_after(str(detail["taskId"]), None, 1):
        return False
    queue.send_fan_out(str(detail["taskId"]), str(detail["eventId"]), event)
    return True


class PushService:
    def __init__(
        self,
        store: TaskStore,
        sender: Sender,
        queue: DeliveryQueue,
        settings: Settings,
        secrets: SigningSecrets,
        clock: Any = time.time,
        files: FileService | None = None,
        sealer: Sealer | None = None,
    ) -> None:
        self._files = files
        self._sealer = sealer  # opens the config's credentials and token, stored sealed
        self._store = store
        self._sender = sender
        self._queue = queue
        self._settings = settings
        self._keys = PushSigningKeys(secrets, settings.push_signing)
        self._now = clock
        self._fair = FairDelivery(store, settings, clock)

    # ------------------------------------------------------------------ hand-off and fan-out
    def hand_off(self, event: dict[str, Any]) -> bool:
        """An event queued in the push queue's shared group by the push rule of earlier versions (the bus fed
        the queue): moved into its task's own group as then, so an upgrade loses none."""
        return hand_off(self._store, self._queue, event)

    def fan_out(self, event: dict[str, Any], resumed: bool = False) -> FanOut:
        """Queue the next `push_fan_out_step` deliveries of an event (configs by id). Not done: the
        caller hands the event back to its task's group, where it stays first (its task's later events wait,
        so each config still gets them in order), and the deliveries just queued take their turn with every
        other task's before the next step. `resumed`: the event was received before, it may have a cursor."""
        pushed = pushed_member(event)
        if pushed is None:
            return FanOut(0, done=True)
        kind, payload = pushed
        detail = event["detail"]
        task_id, event_id = str(detail["taskId"]), str(detail["eventId"])
        head = self._store.head(task_id)  # read once a step: the check below and the configs' expiry
        checked = self._as_in_table(kind, payload, task_id, head)
        if checked is None:
            logger.warning("event not in the table: nothing pushed", extra={"task_id": task_id, "event_id": event_id})
            return FanOut(0, done=True)
        payload = checked
        after = self._store.fan_out_cursor(task_id, event_id) if resumed else None
        size = self._settings.push_fan_out_step
        configs = self._store.push_configs_after(task_id, after, size + 1)  # one more: are any left after this step?
        step, rest = configs[:size], configs[size:]
        now = self._now()
        self._queue.send_deliveries(
            [
                Delivery(
                    event_id=event_id,
                    task_id=task_id,
                    config_id=str(stored.config.id),
                    kind=kind,
                    payload=payload,
                    first_attempt_at=now,
                )
                for stored in step
            ]
        )
        # The checked status, not the event's word: a forged COMPLETED must not expire anyone's configs.
        if kind == "statusUpdate" and TaskState(payload["status"]["state"]).terminal:
            # A config lives as long as its task: once the task has ended, its configs expire with it
            # (docs/decisions/0020-components-and-push-config-lifetime.md, docs/operate.md#data-retention; each
            # step the configs it queued: one step's work stays small).
            expires = (head or {}).get("expiresAt")  # the checked status ended the task: its end wrote expiresAt
            if expires is not None:
                self._store.expire_push_configs(task_id, int(expires), [str(c.config.id) for c in step])
        if rest:
            self._store.set_fan_out_cursor(task_id, event_id, str(step[-1].config.id), int(now) + 24 * 3600)
            return FanOut(len(step), done=False)
        if after is not None:
            self._store.set_fan_out_cursor(task_id, event_id, None, 0)
        return FanOut(len(step), done=True)

    def _as_in_table(
        self, kind: str, payload: Any, task_id: str, head: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """The event's payload as the table vouches for it (`head`: the task item), or None. Anyone allowed to put
        messages on the push queue could otherwise make the Runtime sign any content: a status goes out only if it
        is one of the task's latest statuses (the task item's `statusLog`), an artifact only as the table holds it
        now."""
        if head is None or not isinstance(payload, dict) or payload.get("taskId") != task_id:
            return None
        if payload.get("contextId") != head["contextId"]:
            return None
        if kind == "statusUpdate":
            status = payload.get("status")
            return payload if isinstance(status, dict) and status_digest(status) in head.get("statusLog", ()) else None
        wanted = (payload.get("artifact") or {}).get("artifactId")
        record = self._store.get(task_id)
        stored = next((a for a in record.artifacts if a.artifact_id == wanted), None) if record else None
        if stored is None:
            return None
        artifact = stored.wire()
        if len(json.dumps(artifact)) > MAX_DETAIL_BYTES:  # announced without its parts, as its event was
            artifact = {k: v for k, v in artifact.items() if k != "parts"} | {"parts": [{"text": "(too large)"}]}
        return {"taskId": task_id, "contextId": head["contextId"], "artifact": artifact}

    # ------------------------------------------------------------------ deliver
    def deliver(self, delivery: Delivery, attempt: int) -> Result:
        """One attempt: one POST, all of it (connect, send, read) within its deadline (`push_first_timeout_seconds`
        for a first attempt, else `push_timeout_seconds`), once that deadline is reserved from its subject's budget
        and its receiver is not parked (service/fairness.py); else the delivery is parked without an attempt.
        `attempt`: SQS's receive count; the attempt's number is taken from the delivery's journal of failed
        attempts (parks are none)."""
        stored = self._store.get_push_config(delivery.task_id, delivery.config_id)
        if stored is None:
            return Result(Outcome.DROPPED, reason="config deleted")
        config = stored.config
        log = {"task_id": delivery.task_id, "config_id": delivery.config_id, "webhook_id": delivery.webhook_id}
        subject = self._subject(delivery, stored)
        if subject is None:
            return Result(Outcome.DROPPED, reason="task gone")  # its configs go with it (the sweep)
        try:
            body = self._body(delivery, stored.extensions)
        except ValidationError:  # sent as stored, it could carry extensions its receiver did not activate
            return self._give_up(delivery, "the event is not an A2A StreamResponse", log)
        now = self._now()
        headers = {
            "Content-Type": "application/json",
            "webhook-id": delivery.webhook_id,
            "webhook-timestamp": str(int(now)),
            # Signed with the keys of the config's subject only, so its receiver's key verifies this
            # delivery and no other subject's; asked for each delivery, so a rotated secret is used in time.
            "webhook-signature": sign(
                self._keys.for_subject(subject), delivery.webhook_id, datetime.fromtimestamp(now, tz=UTC), body
            ),
            "User-Agent": "nylorun-push/1",
        }
        if config.authentication is not None:
            # docs/protocol.md §8.4: Authorization from the config's authentication.
            secret = config.authentication.credentials
            credentials = f" {self._open(secret, delivery.task_id)}" if secret else ""
            headers["Authorization"] = f"{config.authentication.scheme}{credentials}"
        if config.token:
            # the a2a-sdk's header for the token
            headers["X-A2A-Notification-Token"] = self._open(config.token, delivery.task_id)
        # Fair delivery workers (service/fairness.py): the subject's budget reserved, or parked without an attempt.
        attempt = self._fair.attempt(delivery.webhook_id, attempt)
        admission = self._fair.admit(subject, config.url, attempt)
        if admission.parked:
            return self._park(delivery, admission.park_seconds, admission.reason, log)
        started, answered = self._now(), False
        try:
            response = self._sender.post(config.url, body.encode(), headers, timeout_seconds=admission.deadline)
            answered = response.status != 429 and response.status < 500
        except AddressRefused as exc:
            answered = True  # nothing was sent: not the receiver's failure
            return self._give_up(delivery, f"refused: {exc}", log)
        except Exception as exc:  # noqa: BLE001 - network errors and timeouts of any kind: retried
            logger.info("push attempt failed", extra={**log, "error": type(exc).__name__, "attempt": attempt})
            return self._retry(delivery, attempt, 0, log, type(exc).__name__)
        finally:
            self._fair.settle(admission, answered, self._now() - started)
        status = response.status
        if 200 <= status < 300:
            metrics.add_metric(name="PushDelivered", unit="Count", value=1)
            return Result(Outcome.DELIVERED)
        if status == 410:
            # The receiver is gone for good: this config is disabled (removed), no more deliveries to it.
            self._store.delete_push_config(delivery.task_id, delivery.config_id)
            metrics.add_metric(name="PushConfigDisabled", unit="Count", value=1)
            logger.info("push receiver gone (410): config disabled", extra=log)
            return Result(Outcome.DISABLED, reason="410 Gone")
        if status == 429 or status >= 500:
            wait = retry_after_seconds(response.headers.get("retry-after"), now)
            return self._retry(delivery, attempt, wait, log, f"HTTP {status}")
        # Decision: other answers (3xx — redirects are not followed — and 4xx) are the receiver refusing
        # this delivery; the same signed request would be refused again, so it is dead-lettered at once.
        return self._give_up(delivery, f"HTTP {status}", log)

    def _subject(self, delivery: Delivery, stored: StoredPushConfig) -> str | None:
        """Whose keys sign: the subject stored with the config (the table, never the event, says whose task it
        is); a config stored before subjects were kept is its task's owner's."""
        if stored.subject:
            return stored.subject
        head = self._store.head(delivery.task_id)
        return str(head["subject"]) if head else None

    def _open(self, stored: str, task_id: str) -> str:
        return self._sealer.open(stored, PUSH_CREDENTIAL, task_id) if self._sealer else stored

    def _body(self, delivery: Delivery, extensions: tuple[str, ...]) -> str:
        """The StreamResponse as the config's creator may see it: only the extensions it activated (the ones
        stored with the config), and stored files as fresh presigned URLs."""
        event = visible(StreamResponse.model_validate({delivery.kind: delivery.payload}), extensions)
        body = event.wire()
        if event.artifact_update is not None and self._files is not None:
            parts = self._files.render_parts(event.artifact_update.artifact.parts)
            body["artifactUpdate"]["artifact"]["parts"] = [part.wire() for part in parts]
        return json.dumps(body, separators=(",", ":"))

    def _retry(self, delivery: Delivery, attempt: int, at_least: int, log: dict[str, Any], reason: str) -> Result:
        if self._now() - delivery.first_attempt_at >= self._settings.push_max_age_seconds:
            return self._give_up(delivery, f"still failing after the retry window ({reason})", log)
        self._fair.attempt_failed(delivery.webhook_id)
        backoff = min(
            self._settings.push_retry_max_seconds, self._settings.push_retry_base_seconds * 2 ** max(0, attempt - 1)
        )
        delay = max(at_least, int(backoff * random.uniform(0.5, 1.0)), 1)  # jitter spreads retries out
        metrics.add_metric(name="PushRetried", unit="Count", value=1)
        return Result(Outcome.RETRY, delay_seconds=min(delay, 43_200), reason=reason)

    def _park(self, delivery: Delivery, seconds: int, reason: str, log: dict[str, Any]) -> Result:
        """Back on the queue without an attempt, still within its retry window (Profile v2: 24 hours)."""
        if self._now() - delivery.first_attempt_at >= self._settings.push_max_age_seconds:
            return self._give_up(delivery, f"still parked after the retry window ({reason})", log)
        return Result(Outcome.RETRY, delay_seconds=min(max(seconds, 1), 43_200), reason=reason)

    def held_seconds(self, subject: str | None = None) -> float:
        """The attempt seconds this process's deliveries held (one subject's, or all): the fairness figure."""
        return self._fair.held_seconds(subject)

    def _give_up(self, delivery: Delivery, reason: str, log: dict[str, Any]) -> Result:
        self._queue.dead_letter(delivery, reason)
        metrics.add_metric(name="PushGaveUp", unit="Count", value=1)
        logger.warning("push delivery dead-lettered", extra={**log, "reason": reason})
        return Result(Outcome.GAVE_UP, reason=reason)
