"""A2A 1.0 wire objects as ProtoJSON.

camelCase names through aliases, enums as their proto names, unions as `oneof` (the member present is the
discriminator), unset (None) fields omitted when dumping. Unknown fields are ignored, as ProtoJSON parsers do
(docs/protocol.md §4).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

JsonObject = dict[str, Any]
# docs/protocol.md §6.2: historyLength unset = server default, 0 = no history, N = the last N; negative is invalid params.
HistoryLength = Annotated[int | None, Field(ge=0)]


class Wire(BaseModel):
    """Base of every wire object: camelCase aliases, snake_case accepted too, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", use_enum_values=False
    )

    def wire(self) -> JsonObject:
        """ProtoJSON: aliases, enums by name, unset/None omitted."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class TaskState(StrEnum):
    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    REJECTED = "TASK_STATE_REJECTED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def interrupted(self) -> bool:
        return self in INTERRUPTED_STATES


# docs/protocol.md §6.1: terminal tasks are immutable; interrupted ones wait for the caller.
TERMINAL_STATES = frozenset({TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED})
INTERRUPTED_STATES = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})


class Role(StrEnum):
    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


class Part(Wire):
    """Exactly one of text | raw | url | data."""

    text: str | None = None
    raw: str | None = None  # base64
    url: str | None = None
    data: Any = None
    media_type: str | None = None
    filename: str | None = None
    metadata: JsonObject | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        present = [name for name in ("text", "raw", "url", "data") if getattr(self, name) is not None]
        if len(present) != 1:
            raise ValueError("a part carries exactly one of text, raw, url or data")
        return self


class Message(Wire):
    message_id: str = Field(min_length=1, max_length=256)
    context_id: str | None = Field(default=None, max_length=256)
    task_id: str | None = Field(default=None, max_length=256)
    role: Role
    parts: list[Part] = Field(min_length=1)
    metadata: JsonObject | None = None
    extensions: list[str] | None = None
    reference_task_ids: list[str] | None = None

    def text(self) -> str:
        """All text parts joined: what a core-tier reply says."""
        return "\n".join(p.text for p in self.parts if p.text is not None)

    def retry_key(self) -> str:
        """What makes a message a retry of another: the same messageId *and* the same content (taskId,
        contextId, role, parts, metadata, extensions, referenceTaskIds). A retry answers with the task the
        first made; the same messageId with other content is another message (callers, the A2A TCK among
        them, reuse messageIds)."""
        content = self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"message_id"})
        canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return f"{self.message_id}#{hashlib.sha256(canonical.encode()).hexdigest()[:32]}"


class TaskStatus(Wire):
    state: TaskState
    message: Message | None = None
    timestamp: str | None = None


class Artifact(Wire):
    artifact_id: str = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    parts: list[Part] = Field(min_length=1)
    metadata: JsonObject | None = None
    extensions: list[str] | None = None


class Task(Wire):
    id: str
    context_id: str
    status: TaskStatus
    artifacts: list[Artifact] | None = None
    history: list[Message] | None = None
    metadata: JsonObject | None = None


class TaskStatusUpdateEvent(Wire):
    task_id: str
    context_id: str
    status: TaskStatus
    metadata: JsonObject | None = None


class TaskArtifactUpdateEvent(Wire):
    task_id: str
    context_id: str
    artifact: Artifact
    append: bool | None = None
    last_chunk: bool | None = None
    metadata: JsonObject | None = None


class StreamResponse(Wire):
    """One of task | message | statusUpdate | artifactUpdate: what a push delivery posts."""

    task: Task | None = None
    message: Message | None = None
    status_update: TaskStatusUpdateEvent | None = None
    artifact_update: TaskArtifactUpdateEvent | None = None


class AuthenticationInfo(Wire):
    scheme: str = Field(min_length=1, max_length=64)
    credentials: str | None = Field(default=None, max_length=4096)


class TaskPushNotificationConfig(Wire):
    tenant: str | None = None
    id: str | None = Field(default=None, max_length=256)
    task_id: str | None = None
    url: str = Field(min_length=1, max_length=2048)
    token: str | None = Field(default=None, max_length=1024)
    authentication: AuthenticationInfo | None = None


class SendMessageConfiguration(Wire):
    accepted_output_modes: list[str] | None = None
    history_length: HistoryLength = None
    task_push_notification_config: TaskPushNotificationConfig | None = None
    return_immediately: bool = False


class SendMessageRequest(Wire):
    tenant: str | None = None
    message: Message
    configuration: SendMessageConfiguration | None = None
    metadata: JsonObject | None = None


# Ids and keys a caller sends are bounded: DynamoDB keys take at most 2048 bytes.
Id = Annotated[str, Field(min_length=1, max_length=256)]


class GetTaskRequest(Wire):
    tenant: str | None = None
    id: Id
    history_length: HistoryLength = None


class CancelTaskRequest(Wire):
    tenant: str | None = None
    id: Id
    metadata: JsonObject | None = None


class ListTasksRequest(Wire):
    tenant: str | None = None
    context_id: str | None = Field(default=None, max_length=256)
    status: TaskState | None = None
    page_size: int | None = Field(default=None, ge=1, le=100)
    page_token: str | None = None
    history_length: HistoryLength = None
    status_timestamp_after: datetime | None = None
    include_artifacts: bool = False

    @field_validator("status", mode="before")
    @classmethod
    def _no_filter(cls, value: Any) -> Any:
        # proto3: TASK_STATE_UNSPECIFIED (0) is the field's zero value, i.e. no filter. "UNRECOGNIZED" is what
        # @a2a-js/sdk 1.3.0 sends for an unset status (its generated enum's default): no filter either.
        if value in ("TASK_STATE_UNSPECIFIED", "UNRECOGNIZED", 0):
            return None
        return value

    @field_validator("status_timestamp_after")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        if value is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:  # e.g. 0001-01-01T00:00:00+05:00: not a UTC instant datetime can hold
                raise ValueError("must be a timestamp between years 1 and 9999 in UTC") from None
        return value


class ListTasksResponse(Wire):
    tasks: list[Task]
    next_page_token: str
    page_size: int
    total_size: int

    def wire(self) -> JsonObject:
        # docs/protocol.md §7.5: nextPageToken, pageSize and totalSize are always present, even when zero/empty.
        out = super().wire()
        out.setdefault("nextPageToken", "")
        return out


class TaskIdRequest(Wire):
    """GetTaskPushNotificationConfig / DeleteTaskPushNotificationConfig."""

    tenant: str | None = None
    task_id: Id
    id: Id


class ListPushConfigsRequest(Wire):
    tenant: str | None = None
    task_id: Id
    page_size: int | None = Field(default=None, ge=1, le=100)
    page_token: str | None = None


class ListPushConfigsResponse(Wire):
    configs: list[TaskPushNotificationConfig]
    next_page_token: str | None = None


class CreatePushConfigRequest(TaskPushNotificationConfig):
    """CreateTaskPushNotificationConfig params are the config itself, flat."""

    task_id: Id


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds and `Z`: fixed width, so it also sorts as text."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def now_timestamp() -> str:
    return format_timestamp(datetime.now(UTC))
