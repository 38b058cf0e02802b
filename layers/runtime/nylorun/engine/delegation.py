"""Durable delegation: `turn.delegate(...)` hands work to another A2A 1.0 Agent and waits for it
without holding a Lambda (docs/writing/delegation.md).

Every step is journaled (engine/replay.py), so a rerun replays what the delegate answered instead of asking again:

* `delegate` (an effect): SendMessage with `returnImmediately`, a messageId and contextId made from the effect's
  key, and (when the delegate signs its pushes and this Runtime knows its public URL) a push config pointing at
  this Runtime's callback for this delegation. A run that died after sending and before journaling does not send
  again: it looks for the task in the context it named (ListTasks) and sends only if there is none.
* while the delegate's task works: a `wait`, parked on Step Functions like an interaction; the delegate's signed
  callback wakes it (service/delegation.py), or the wait's timeout does (a poll). Then `delegate:read` (GetTask).
* when the delegate needs a person: the same kind of interaction on the delegating turn, with the delegate's prompt
  and detail; the caller's typed answer goes back to the delegate as its typed answer (`delegate:answer`).
  Profile v2: text never approves, on either side.
* at the end: a `Delegated` for the Agent's code only; the delegate's usage (telemetry/v1) is added to the turn.

Profile v2 (never delegations): nothing of the delegate (its identity, messages, artifacts, ids) reaches the caller
except what the Agent's author puts in the reply; the interaction shown is the delegating turn's own.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nylorun.domain.behalf import ON_BEHALF_HEADER, caller_scope
from nylorun.domain.ids import RUNTIME_KEY
from nylorun.domain.messages import DELEGATE_LOOK
from nylorun.engine.delegate_answers import kept
from nylorun.engine.replay import Replay
from nylorun.observability import logger
from nylorun.ports import Sealer
from nylorun.ports.delegation import CALLBACK_PATH, DELEGATION, AnswerTooLarge, Delegates, DelegateUnavailable
from nylorun.profile.extensions import INTERACTIONS, TELEMETRY, InteractionKind
from nylorun.protocol.models import Message, Part

DELEGATION_NAMESPACE = uuid.UUID("0c3f4a52-5a7e-4b58-9d43-7e0f1a2b3c4d")
SEND, READ, ANSWER, CANCEL, WAIT = "delegate", DELEGATE_LOOK, "delegate:answer", "delegate:cancel", "delegate"
# The answer the Runtime gives a relayed connection when the delegate went on without it: the person connected in
# the browser, at the delegate (its callback resumed its turn), so nothing is handed back (service/relayed.py).
MOVED_ON = "delegateMovedOn"
ENDED = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
ASKING: dict[str, InteractionKind] = {"TASK_STATE_INPUT_REQUIRED": "question", "TASK_STATE_AUTH_REQUIRED": "approval"}

Credentials = str | Mapping[str, str] | None
MAX_WAITS = 1500  # x about 13 history events per wait: 19,500 of an execution's 25,000


def callback_token(task_id: str, key: str) -> str:
    """The push config's token for one delegation (`X-A2A-Notification-Token`): keyed by the Runtime's key, so it
    needs no storing and a callback for another task or delegation does not carry it."""
    return RUNTIME_KEY.digest("delegation-callback", f"{task_id}\n{key}")


@dataclass(frozen=True)
class Delegated:
    """What the delegate's task came to: for the delegating Agent's code only (Profile v2: never delegations).
    `state` is `completed`, `failed`, `canceled`, `rejected` or `unreachable`; `text` the delegate's last word.
    `omitted`: the artifacts too large to hand over (engine/delegate_answers.py), each `artifactId`, `name`, `bytes`."""

    state: str
    text: str
    data: list[Any] = field(default_factory=list)  # the `data` parts of its last message and artifacts
    artifacts: list[dict[str, Any]] = field(default_factory=list)  # A2A wire artifacts
    omitted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.state == "completed"


@dataclass
class DelegationDeps:
    """What a turn needs to delegate: the A2A client, the sealer for the credentials and callback keys kept in
    the journal, where the delegate's callbacks reach this Runtime (None: poll only) and how long to wait."""

    client: Delegates
    sealer: Sealer | None
    callback_base: str | None
    timeout_seconds: int
    clock: Callable[[], float] = time.time
    # Each wait parks the turn's Step Functions execution once and wakes it once (a callback or a poll): about 13
    # history events, and an execution holds at most 25,000 (Step Functions quotas). Past this many waits in one
    # turn the delegate's task is canceled and the delegation reported failed, before the execution would fail.
    max_waits: int = MAX_WAITS


class Delegation:
    """One `turn.delegate(...)`: the journaled steps above, driven by the turn's replay."""

    def __init__(
        self,
        deps: DelegationDeps,
        replay: Replay,
        task_id: str,
        ask: Callable[[InteractionKind, str, dict[str, Any] | None], dict[str, Any]],
        usage: Callable[[int, float], None],
        caller: str = "",
    ) -> None:
        # The subject of the turn's own caller: the delegate keeps it apart by its scope (nylorun.domain.behalf).
        self._scope = caller_scope(caller)
        self._deps = deps
        self._replay = replay
        self._task_id = task_id
        self._ask = ask
        self._usage = usage

    def run(self, url: str, message: str | Message | Sequence[Part | str], credentials: Credentials) -> Delegated:
        headers = {**_headers(credentials), ON_BEHALF_HEADER: self._scope}
        parts = _parts(message)
        record = self._replay.effect(
            SEND, lambda key: self._send(key, url, headers, parts), reconcile=lambda key: self._find(key, url, headers, parts)
        )
        if "refused" in record:
            return Delegated(state="unreachable", text=str(record["refused"]))
        snapshot: dict[str, Any] = record["snapshot"]
        answered: dict[str, dict[str, Any]] = {}  # the delegate's interaction id → the caller's answer
        while True:
            # A look that failed (the delegate unreachable for a moment) is looked at again after the next wait.
            state = "TASK_STATE_WORKING" if "unavailable" in snapshot else _state(snapshot)
            if state is None or state in ENDED:
                return self._ended(snapshot)
            if state in ASKING:
                snapshot = self._relay(record, snapshot, ASKING[state], headers, answered)
                continue
            # The journaled time of the last look (never the clock: a replay must take the same branch).
            if float(snapshot.get("at", record["startedAt"])) - float(record["startedAt"]) > self._deps.timeout_seconds:
                # Waited as long as an interaction may: the delegate's work is canceled and reported failed.
                self._replay.effect(CANCEL, lambda key: self._cancel(record, headers), idempotent=True)
                return Delegated(state="failed", text="The delegated work did not finish in time.")
            if self._replay.waits >= self._deps.max_waits:  # counted in the journal: a replay decides the same
                logger.warning("delegation stopped: too many waits for one turn", extra={"waits": self._replay.waits})
                self._replay.effect(CANCEL, lambda key: self._cancel(record, headers), idempotent=True)
                return Delegated(state="failed", text="The delegated work took too long to follow; it was canceled.")
            self._replay.wait(WAIT)
            snapshot = self._replay.effect(READ, lambda key: self._read(record, headers), idempotent=True)

    # ------------------------------------------------------------------ the steps
    def _send(self, key: str, url: str, headers: dict[str, str], parts: list[dict[str, Any]]) -> dict[str, Any]:
        context_id = _context_id(key)
        keys = self._signing_keys(url, headers)
        configuration: dict[str, Any] = {"returnImmediately": True}
        if keys:  # only a delegate whose callbacks can be verified gets one (else: polling)
            configuration["taskPushNotificationConfig"] = {
                "id": "nylorun-delegation",
                "url": f"{str(self._deps.callback_base).rstrip('/')}{CALLBACK_PATH}/{self._task_id}/{key}",
                "token": callback_token(self._task_id, key),
            }
        params = {
            "message": {
                "messageId": str(uuid.uuid5(DELEGATION_NAMESPACE, f"{key}/message")),
                "contextId": context_id,
                "role": "ROLE_USER",
                "parts": parts,
            },
            "configuration": configuration,
        }
        record = self._record(url, context_id, headers, keys)
        try:
            answer = self._deps.client.send(url, headers, params)
        except DelegateUnavailable as failed:
            if failed.code is not None:  # it answered with an error: nothing was made
                logger.warning("delegate refused the message", extra={"reason": failed.reason})
                return {**record, "refused": "The delegate refused the work."}
            found = self._client_call(lambda: self._deps.client.find_tasks(url, headers, context_id), default=[])
            if not found:  # no answer and no task: it may never have arrived
                logger.warning("delegate unreachable", extra={"reason": failed.reason})
                return {**record, "refused": "The delegate could not be reached."}
            answer = {"task": found[0]}
        task = answer.get("task")
        return {**record, "taskId": task.get("id") if isinstance(task, dict) else None, "snapshot": kept(answer)}

    def _find(self, key: str, url: str, headers: dict[str, str], parts: list[dict[str, Any]]) -> dict[str, Any]:
        """A run died after `_send` started: the task it made, if the delegate has one in the context it named;
        else the message never arrived and is sent now (same messageId)."""
        context_id = _context_id(key)
        found = self._client_call(lambda: self._deps.client.find_tasks(url, headers, context_id), default=None)
        if found is None:
            raise DelegateUnavailable("ListTasks failed while reconciling a lost send")
        if not found:
            return self._send(key, url, headers, parts)
        record = self._record(url, context_id, headers, self._signing_keys(url, headers))
        return {**record, "taskId": found[0].get("id"), "snapshot": kept({"task": found[0]})}

    def _signing_keys(self, url: str, headers: dict[str, str]) -> list[str]:
        """The delegate's keys for this Agent's deliveries; none asked for when no callback can reach this Runtime."""
        if not self._deps.callback_base:
            return []
        keys: list[str] = self._client_call(lambda: self._deps.client.signing_keys(url, headers), default=[])
        return keys

    def _record(self, url: str, context_id: str, headers: dict[str, str], keys: list[str]) -> dict[str, Any]:
        """What the journal keeps of a delegation: where, in which context, since when, and its secrets sealed."""
        return {
            "url": url,
            "contextId": context_id,
            "startedAt": self._deps.clock(),
            "headers": self._seal(json.dumps(headers)),
            "keys": self._seal(json.dumps(keys)),
        }

    def _read(self, record: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        try:
            return kept({"task": self._deps.client.get_task(record["url"], headers, str(record["taskId"])), "at": self._deps.clock()})
        except DelegateUnavailable as failed:
            if failed.code == -32001 or isinstance(failed, AnswerTooLarge):
                # TaskNotFoundError: the delegate no longer has it (expired, deleted); or its answer is larger than
                # any Nylorun delegate's, and is not read: its work is canceled, for nobody would read it.
                if isinstance(failed, AnswerTooLarge):
                    self._cancel(record, headers)
                gone = {"state": "TASK_STATE_FAILED", "message": {"parts": [{"text": _GONE[failed.code == -32001]}]}}
                return {"task": {"id": record["taskId"], "status": gone}, "at": self._deps.clock()}
            logger.warning("could not read the delegate's task", extra={"reason": failed.reason})
            return {"unavailable": failed.reason, "at": self._deps.clock()}

    def _cancel(self, record: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        try:
            return {"task": self._deps.client.cancel(record["url"], headers, str(record["taskId"]))}
        except DelegateUnavailable as failed:
            logger.warning("could not cancel the delegate's task", extra={"reason": failed.reason})
            return {}

    def _relay(
        self,
        record: dict[str, Any],
        snapshot: dict[str, Any],
        kind: InteractionKind,
        headers: dict[str, str],
        answered: dict[str, dict[str, Any]],
    ) -> Any:
        """The delegate needs a person: ask the caller the same thing, and hand the typed answer back. An
        interaction the caller answered already (its answer did not get through) is answered again, not re-asked."""
        message = (snapshot["task"].get("status") or {}).get("message") or {}
        asked = (message.get("metadata") or {}).get(INTERACTIONS) or {}
        ask_kind: InteractionKind = asked["kind"] if asked.get("kind") in ("approval", "question", "connection") else kind
        prompt = str(asked.get("prompt") or _text(message) or "The work needs your answer.")
        detail = asked.get("detail") if isinstance(asked.get("detail"), dict) else None
        asked_id = str(asked.get("interactionId") or "")
        answer = answered.get(asked_id) if asked_id else None
        if answer is None:
            answer = self._ask(ask_kind, prompt, detail)
            if asked_id:
                answered[asked_id] = answer
        if answer.get(MOVED_ON):
            # docs/writing/connections.md: connected at the delegate; look again (re-asked if it still waits
            # for it).
            answered.pop(asked_id, None)
            return self._replay.effect(READ, lambda key: self._read(record, headers), idempotent=True)

        def send(key: str) -> dict[str, Any]:
            typed: dict[str, Any] = {"interactionId": asked.get("interactionId")} if asked.get("interactionId") else {}
            if "approved" in answer:
                typed["approved"] = bool(answer["approved"])
                words = "Approved." if answer["approved"] else "Declined."
            else:
                typed["value"] = answer.get("value")
                words = str(answer.get("value"))
            reply: dict[str, Any] = {
                "messageId": str(uuid.uuid5(DELEGATION_NAMESPACE, f"{key}/answer")),
                "contextId": record["contextId"],
                "taskId": record["taskId"],
                "role": "ROLE_USER",
                "parts": [{"text": words}],
            }
            if "interactionId" in typed:  # Profile v2: only the typed answer approves
                reply["metadata"] = {INTERACTIONS: typed}
                reply["extensions"] = [INTERACTIONS]
            try:
                sent = self._deps.client.send(
                    record["url"], headers, {"message": reply, "configuration": {"returnImmediately": True}}
                )
            except DelegateUnavailable as failed:
                logger.warning("could not hand the answer to the delegate", extra={"reason": failed.reason})
                return {"unavailable": failed.reason, "at": self._deps.clock()}  # looked at (and answered) again
            return kept(sent) if isinstance(sent.get("task"), dict) else self._read(record, headers)

        return self._replay.effect(ANSWER, send, idempotent=True)

    def _ended(self, snapshot: dict[str, Any]) -> Delegated:
        task = snapshot.get("task")
        if not isinstance(task, dict):  # a direct answer: a message, no task
            message = snapshot.get("message")
            if not isinstance(message, dict):
                return Delegated(state="failed", text="The delegate's answer could not be read.")
            return Delegated(state="completed", text=_text(message), data=_data([message]))
        message = (task.get("status") or {}).get("message") or {}
        used = (message.get("metadata") or {}).get(TELEMETRY) or {}
        if used.get("tokens") or used.get("costUsd"):
            self._usage(int(used.get("tokens") or 0), float(used.get("costUsd") or 0.0))  # journaled: counted once
        artifacts = [a for a in task.get("artifacts") or [] if isinstance(a, dict)]
        state = str(_state(snapshot)).removeprefix("TASK_STATE_").lower()
        omitted = list(snapshot.get("omitted") or [])
        return Delegated(state=state, text=_text(message), data=_data([message, *artifacts]), artifacts=artifacts, omitted=omitted)

    # ------------------------------------------------------------------ helpers
    def _seal(self, value: str) -> str:
        return self._deps.sealer.seal(value, DELEGATION, self._task_id) if self._deps.sealer else value

    @staticmethod
    def _client_call(call: Callable[[], Any], default: Any) -> Any:
        try:
            return call()
        except DelegateUnavailable as failed:
            logger.warning("delegate call failed", extra={"reason": failed.reason})
            return default


def open_record(record: Mapping[str, Any], sealer: Sealer | None, task_id: str) -> tuple[dict[str, str], list[str]]:
    """A journaled delegation's credentials (headers) and the delegate's signing keys."""

    def opened(value: Any) -> Any:
        text = sealer.open(str(value), DELEGATION, task_id) if sealer else str(value)
        return json.loads(text)

    return dict(opened(record.get("headers") or "{}")), list(opened(record.get("keys") or "[]"))


_GONE = {True: "The delegate no longer has the task.", False: "The delegate's answer was larger than this Runtime reads."}


def _context_id(key: str) -> str:
    """The context the delegation's message names at the delegate: made from the step's key, so a rerun finds it."""
    return str(uuid.uuid5(DELEGATION_NAMESPACE, f"{key}/context"))


def _headers(credentials: Credentials) -> dict[str, str]:
    if credentials is None:
        return {}
    if isinstance(credentials, str):
        return {"Authorization": f"Bearer {credentials}"}
    return {str(k): str(v) for k, v in credentials.items()}


def _parts(message: str | Message | Sequence[Part | str]) -> list[dict[str, Any]]:
    if isinstance(message, str):
        return [{"text": message}]
    if isinstance(message, Message):
        return [p.wire() for p in message.parts]
    return [(Part(text=p) if isinstance(p, str) else p).wire() for p in message]


def _state(snapshot: Mapping[str, Any]) -> str | None:
    task = snapshot.get("task")
    return str((task.get("status") or {}).get("state")) if isinstance(task, dict) else None


def _text(message: Mapping[str, Any]) -> str:
    return "\n".join(str(p["text"]) for p in message.get("parts") or [] if isinstance(p, dict) and "text" in p)


def _data(items: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [p["data"] for item in items for p in item.get("parts") or [] if isinstance(p, dict) and "data" in p]
