"""The Runtime's side of delegations that are not the turn's own steps: the delegate's push callbacks,
and canceling a delegating task's delegates.

A callback only wakes the waiting turn: what it says is never used (the turn reads the delegate's task itself,
with its credentials). It is still checked before it wakes anything, so nobody else can make the Runtime poll:
the push config's token (keyed by the Runtime's key for this task and delegation), the Standard Webhooks signature
with the keys the delegate published for this Runtime's subject there, and the task it names. A delivery taken
once (its `webhook-id`) wakes nothing again: a captured delivery replayed, or the sender's retry of one.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from nylorun.engine.delegation import SEND, WAIT, callback_token, open_record
from nylorun.engine.replay import opaque_id
from nylorun.observability import logger, metrics
from nylorun.ports import JournalEntry, Sealer, StoreError, TaskStore, TurnOrchestrator
from nylorun.ports.delegation import CallbackRefused, CallbackReplays, Delegates, DelegateUnavailable
from nylorun.protocol.models import TaskState
from nylorun.service.relayed import Answer, close_if_moved_on

# Standard Webhooks refuses a delivery whose timestamp is more than 5 minutes off (standardwebhooks' tolerance):
# a delivery id remembered twice that long outlives every replay the signature check lets through.
REPLAY_WINDOW_SECONDS = 10 * 60


class DelegationCallbacks:
    def __init__(
        self,
        store: TaskStore,
        orchestrator: TurnOrchestrator,
        client: Callable[[], Delegates],
        sealer: Sealer | None,
        replays: CallbackReplays,
        answer: Answer | None = None,
    ) -> None:
        self._answer = answer  # answers a relayed connection the delegate no longer asks for (service/relayed.py)
        self._replays = replays
        self._store = store
        self._orchestrator = orchestrator
        self._client = client  # made on first use: most api requests never delegate
        self._sealer = sealer

    # ------------------------------------------------------------------ the delegate's push callback
    def receive(self, task_id: str, key: str, headers: Mapping[str, str], body: bytes) -> None:
        """Check a callback and wake the turn waiting on that delegation; `CallbackRefused` says why not."""
        token = headers.get("x-a2a-notification-token", "")
        if not hmac.compare_digest(token.encode(), callback_token(task_id, key).encode()):
            raise CallbackRefused(401, "unknown delegation")
        journal = self._store.journal(task_id)
        sent = _delegation(task_id, key, journal)
        if sent is None or not isinstance(sent.result, dict) or not sent.result.get("taskId"):
            raise CallbackRefused(404, "unknown delegation")
        _, keys = open_record(sent.result, self._sealer, task_id)
        if not _signed(keys, body, headers):
            metrics.add_metric(name="DelegateCallbackRefused", unit=MetricUnit.Count, value=1)
            raise CallbackRefused(401, "signature does not verify")
        if _named_task(body) != sent.result["taskId"]:
            raise CallbackRefused(400, "the delivery is about another task")
        delivery = headers.get("webhook-id", "")[:128]
        if not self._replays.first_delivery(task_id, delivery, int(time.time()) + REPLAY_WINDOW_SECONDS):
            # Answered as taken (204) so a sender's retry stops; it wakes nothing.
            metrics.add_metric(name="DelegateCallbackReplayed", unit=MetricUnit.Count, value=1)
            return
        record = self._store.get(task_id)
        if record is None or record.state.terminal:
            # The delegating task ended (canceled) while the delegate works on: cancel it (again: the first try may
            # have failed) rather than let it run for nobody.
            if record is not None and record.state in (TaskState.CANCELED, TaskState.FAILED):
                self._cancel(task_id, sent.result)
            return
        if self._answer is not None:
            close_if_moved_on(record, journal, key, body, self._answer)
        waits = [entry for entry in journal.values() if entry.kind == "wait" and entry.name == WAIT and not entry.finished]
        if not waits:
            return  # the turn is not waiting (it is reading, or asking the caller): it looks again anyway
        wait = max(waits, key=lambda entry: entry.seq)
        try:
            # Which delivery woke it (its webhook-id, from the verified headers): an operator can match it to the
            # delegate's delivery log.
            woken_by = {"woken": "callback", "delivery": delivery}
            self._store.journal_finish(task_id, wait.seq, woken_by)
        except StoreError:
            return  # the task is gone meanwhile
        wait_token = self._store.get_wait_token(task_id, opaque_id(task_id, wait.seq, "wait"))
        if wait_token is not None:  # else the turn has not parked yet: parking sees the finished wait
            self._orchestrator.resume(wait_token)
        metrics.add_metric(name="DelegateCallback", unit=MetricUnit.Count, value=1)

    # ------------------------------------------------------------------ cancel
    def cancel_delegates(self, task_id: str) -> None:
        """The delegating task was canceled: cancel each task it delegated (real CancelTask). Best effort: a
        delegate's later callback cancels again (`receive`)."""
        for entry in self._store.journal(task_id).values():
            if entry.kind == "effect" and entry.name == SEND and isinstance(entry.result, dict) and entry.result.get("taskId"):
                self._cancel(task_id, entry.result)

    def _cancel(self, task_id: str, sent: dict[str, Any]) -> None:
        headers, _ = open_record(sent, self._sealer, task_id)
        try:
            self._client().cancel(str(sent["url"]), headers, str(sent["taskId"]))
        except DelegateUnavailable as failed:
            # -32002 (not cancelable): it had ended already.
            if failed.code != -32002:
                logger.warning("could not cancel a delegate's task", extra={"reason": failed.reason})
                metrics.add_metric(name="DelegateCancelFailed", unit=MetricUnit.Count, value=1)
            return
        metrics.add_metric(name="DelegateCanceled", unit=MetricUnit.Count, value=1)


def _delegation(task_id: str, key: str, journal: Mapping[int, JournalEntry]) -> JournalEntry | None:
    for seq, entry in journal.items():
        if entry.kind == "effect" and entry.name == SEND and entry.finished and opaque_id(task_id, seq, "eff") == key:
            return entry
    return None


def _signed(keys: list[str], body: bytes, headers: Mapping[str, str]) -> bool:
    wanted = {name: headers.get(name, "") for name in ("webhook-id", "webhook-timestamp", "webhook-signature")}
    for secret in keys:
        try:
            Webhook(secret).verify(body, wanted)
        except (WebhookVerificationError, ValueError):
            continue
        return True
    return False


def _named_task(body: bytes) -> str | None:
    try:
        event = json.loads(body)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    for field, id_field in (("task", "id"), ("statusUpdate", "taskId"), ("artifactUpdate", "taskId")):
        if isinstance(event.get(field), dict):
            named = event[field].get(id_field)
            return str(named) if named is not None else None
    return None
