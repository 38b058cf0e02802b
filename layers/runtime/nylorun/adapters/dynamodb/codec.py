"""Records ↔ plain item dicts ↔ DynamoDB attribute values, and page tokens: the one encoding of what the
stores keep.

Plain dicts are the items of `layout` with Python values (str, int, bool, list); `to_item` / `from_item`
turn them into attribute values and back. JSON-valued attributes (status, messages, artifacts, metadata,
journal results and answers, push configs) are written with `dumps` and read with `loads`, so a value comes
back as its JSON round trip (tuples as lists, keys as strings). The in-memory store keeps what this codec
produces and reads it back through it, so both stores hand out the same values.
"""

from __future__ import annotations

import base64
import hmac
import json
import time
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from nylorun.adapters.dynamodb import layout, salvage
from nylorun.domain.ids import RUNTIME_KEY
from nylorun.events import logged
from nylorun.limits import stored_bytes
from nylorun.ports import (
    InvalidPageToken,
    JournalEntry,
    Owner,
    StoredPushConfig,
    TaskRecord,
    UncertainTask,
    Uncertainty,
)
from nylorun.profile.extensions import Interaction, PlanStep
from nylorun.protocol.models import Artifact, Message, TaskPushNotificationConfig, TaskStatus, now_timestamp

_ser = TypeSerializer()
_de = TypeDeserializer()


# ---------------------------------------------------------------- attribute values
def to_item(plain: dict[str, Any]) -> dict[str, Any]:
    """A plain dict as DynamoDB attribute values (None values are left out: absent attributes)."""
    return {k: _ser.serialize(v) for k, v in plain.items() if v is not None}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    """Attribute values as a plain dict (numbers as int when whole)."""
    return {k: _plain_value(_de.deserialize(v)) for k, v in item.items()}


def _plain_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, set):
        return sorted(value)
    if isinstance(value, list):
        return [_plain_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain_value(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------- JSON attributes
def dumps(value: Any) -> str:
    return json.dumps(value)


def loads(text: str) -> Any:
    return json.loads(text)


def round_trip(value: Any) -> Any:
    """A value as the store hands it back (its JSON round trip)."""
    return None if value is None else loads(dumps(value))


def message_body(message: Message) -> str:
    return dumps(message.wire())


def message(body: str) -> Message:
    return Message.model_validate_json(body)


def artifact_body(artifact: Artifact) -> str:
    return dumps(artifact.wire())


def artifact(body: str) -> Artifact:
    return Artifact.model_validate_json(body)


def status_body(status: TaskStatus) -> str:
    return dumps(status.wire())


def interaction_body(interaction: Interaction) -> str:
    return dumps(interaction.wire())


def plan_body(plan: list[PlanStep]) -> str:
    return dumps([s.wire() for s in plan])


# ---------------------------------------------------------------- tasks
def spilled_metadata(record: TaskRecord) -> str | None:
    """The task's metadata JSON when it is too large to share the task item with the status (else None)."""
    body = dumps(record.metadata) if record.metadata else ""
    return body if len(body) > layout.INLINE_METADATA_BYTES else None


def task_item(
    record: TaskRecord,
    *,
    status_ts: str | None = None,
    msg_seq: int | None = None,
    art_seq: int = 0,
    content_bytes: int | None = None,
    interaction_seq: int | None = None,
    status_log: list[str] | None = None,
) -> dict[str, Any]:
    """The task item (plain) of a record; counters default to those of a record whose history is all stored, the
    status log to its one status."""
    ts = status_ts or record.status.timestamp or now_timestamp()
    spilled = spilled_metadata(record) is not None
    return {
        **layout.task(record.task_id),
        **(uncertain_attributes(record.task_id, ts, record.uncertainty) if record.uncertainty is not None else {}),
        "attempt": record.attempt,
        "taskId": record.task_id,
        "contextId": record.context_id,
        "agent": record.owner.agent,
        "subject": record.owner.subject,
        "turn": record.turn,
        "state": record.status.state.value,
        "status": status_body(record.status),
        "statusLog": status_log or logged(None, status_body(record.status)),
        "statusTs": ts,
        "metadata": dumps(record.metadata) if record.metadata is not None and not spilled else None,
        "metadataItem": spilled or None,
        "interaction": interaction_body(record.interaction) if record.interaction is not None else None,
        "interactionSeq": (interaction_seq or 0) if record.interaction is not None else None,
        "plan": plan_body(record.plan) if record.plan else None,
        "version": record.version,
        "expiresAt": record.expires_at,
        "msgSeq": len(record.history) if msg_seq is None else msg_seq,
        "artSeq": art_seq,
        "contentBytes": (
            sum(map(stored_bytes, record.history)) + sum(map(stored_bytes, record.artifacts))
            if content_bytes is None
            else content_bytes
        ),
        **layout.list_keys(record.owner, record.task_id, record.context_id, ts),
    }


def task_record(item: dict[str, Any]) -> TaskRecord:
    """The record of a task item (plain), without history and artifacts (their own items)."""
    return TaskRecord(
        task_id=item["taskId"],
        context_id=item["contextId"],
        owner=Owner(subject=item["subject"], agent=item["agent"]),
        turn=int(item["turn"]),
        # One stored value that no longer validates is left out (logged), never the whole read (salvage.py).
        status=salvage.status(item["status"], item["taskId"], item.get("state"), item.get("statusTs")),
        metadata=salvage.metadata(item.get("metadata"), item["taskId"]),
        interaction=salvage.interaction(item.get("interaction"), item["taskId"]),
        plan=salvage.plan(item.get("plan"), item["taskId"]),
        version=int(item["version"]),
        expires_at=int(item["expiresAt"]) if item.get("expiresAt") is not None else None,
        attempt=int(item.get("attempt") or 0),
        uncertainty=uncertainty(item),
    )


def uncertain_attributes(task_id: str, since: str, uncertainty: Uncertainty) -> dict[str, Any]:
    """What marks a task item as waiting for an operator (`layout.UNCERTAIN_ATTRIBUTES`)."""
    return {
        **layout.uncertain_keys(task_id, since),
        "uncertainEffect": uncertainty.effect_id,
        "uncertainSeq": uncertainty.seq,
        "uncertainAttempt": uncertainty.attempt,
    }


def uncertainty(item: dict[str, Any]) -> Uncertainty | None:
    """The lost effect a task item (or its Uncertain index entry) is marked with, if any."""
    if not item.get("GSI4PK"):
        return None
    return Uncertainty(
        effect_id=str(item["uncertainEffect"]), seq=int(item["uncertainSeq"]), attempt=int(item["uncertainAttempt"])
    )


def uncertain_task(item: dict[str, Any]) -> UncertainTask:
    marked = uncertainty(item)
    assert marked is not None, "an Uncertain index entry is marked"
    return UncertainTask(
        task_id=str(item["taskId"]),
        context_id=str(item["contextId"]),
        owner=Owner(subject=str(item["subject"]), agent=str(item["agent"])),
        since=str(item["GSI4SK"]).split("#", 1)[0],
        uncertainty=marked,
    )


def expired(item: dict[str, Any]) -> bool:
    """The item's TTL (`expiresAt`) has passed: it is gone for readers, whether or not DynamoDB has deleted it yet
    (TTL deletes within days of the expiry:
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html)."""
    at = item.get("expiresAt")
    return at is not None and int(at) <= time.time()


def head(item: dict[str, Any]) -> dict[str, Any]:
    """What `TaskStore.head` answers: the task item's plain values, keys included."""
    return {k: v for k, v in item.items() if v is not None}


# ---------------------------------------------------------------- journal
def journal_item(task_id: str, entry: JournalEntry) -> dict[str, Any]:
    return {
        **layout.journal_op(task_id, entry.seq),
        "seq": entry.seq,
        "kind": entry.kind,
        "name": entry.name,
        "finished": entry.finished,
        "result": dumps(entry.result) if entry.finished else None,
        "answer": dumps(entry.answer) if entry.answer is not None else None,
        # When, for an operator's eyes (`nylorun admin show`).
        "startedAt": entry.started_at or now_timestamp(),
        "finishedAt": entry.finished_at or (now_timestamp() if entry.finished else None),
    }


def journal_entry(item: dict[str, Any]) -> JournalEntry:
    return JournalEntry(
        seq=int(item["seq"]),
        kind=item["kind"],
        name=item["name"],
        finished=bool(item.get("finished", False)),
        result=loads(item["result"]) if item.get("result") is not None else None,
        answer=loads(item["answer"]) if item.get("answer") is not None else None,
        started_at=item.get("startedAt"),
        finished_at=item.get("finishedAt"),
    )


# ---------------------------------------------------------------- push configs
def push_item(task_id: str, stored: StoredPushConfig) -> dict[str, Any]:
    config_id = str(stored.config.id)
    return {
        **layout.push_config(task_id, config_id),
        **layout.push_index(task_id, config_id),
        "body": dumps(stored.config.wire()),
        "createdAt": stored.created_at,
        "extensions": list(stored.extensions) or None,
        "expiresAt": stored.expires_at,
        "subject": stored.subject or None,
    }


def push_config(item: dict[str, Any]) -> StoredPushConfig:
    expires = item.get("expiresAt")
    return StoredPushConfig(
        config=TaskPushNotificationConfig.model_validate_json(item["body"]),
        created_at=item["createdAt"],
        extensions=tuple(item.get("extensions") or ()),
        expires_at=int(expires) if expires is not None else None,
        subject=str(item.get("subject") or ""),
    )


# ---------------------------------------------------------------- page tokens
def fingerprint(bound: list[Any]) -> str:
    """What a page token is bound to: the whole query, its values included."""
    # Keyed: the memory store's binds the subject itself, and a token's body can be read.
    return RUNTIME_KEY.digest("page-query", json.dumps(bound, default=str))[:16]


def seal(raw: Any) -> str:
    """`raw` as a page token: its JSON, with a MAC under the Runtime's key, so a caller can neither make one up nor
    edit one, only hand back what it was given (docs/decisions/0016-page-tokens-sealed.md)."""
    body = base64.urlsafe_b64encode(json.dumps(raw, separators=(",", ":")).encode()).decode().rstrip("=")
    return f"{body}.{RUNTIME_KEY.digest('page-token', body)[:32]}"


def unseal(token: str) -> Any:
    """What `seal` sealed; InvalidPageToken for anything this Runtime did not issue."""
    body, _, mac = token.partition(".")
    if not hmac.compare_digest(mac.encode(), RUNTIME_KEY.digest("page-token", body)[:32].encode()):
        raise invalid_token()
    try:
        return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except ValueError:
        raise invalid_token() from None


def encode_token(key: Any, bound_to: str) -> str:
    return seal({"k": key, "f": bound_to})


def decode_token(token: str, bound_to: str) -> Any:
    """The key a token resumes after; InvalidPageToken unless this Runtime issued it for this query."""
    raw = unseal(token)
    try:
        if raw["f"] != bound_to:
            raise ValueError("token for another query")
        return raw["k"]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise invalid_token() from None


def invalid_token() -> InvalidPageToken:
    return InvalidPageToken("pageToken is not one this Runtime issued for this query")
