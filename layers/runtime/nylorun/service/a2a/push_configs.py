"""The four push-config operations (create, get, list, delete) and the checks a config passes first."""

from __future__ import annotations

import hmac
import uuid

from nylorun.domain.ids import RUNTIME_KEY
from nylorun.domain.urls import PushUrlRejected, check_push_url
from nylorun.ports import QuotaExceeded, StoredPushConfig, with_task
from nylorun.protocol.errors import InvalidParamsError, PushNotificationNotSupportedError, TaskNotFoundError
from nylorun.protocol.models import (
    AuthenticationInfo,
    CreatePushConfigRequest,
    JsonObject,
    ListPushConfigsRequest,
    ListPushConfigsResponse,
    TaskIdRequest,
    TaskPushNotificationConfig,
    now_timestamp,
)
from nylorun.service.a2a.base import ServiceBase
from nylorun.service.a2a.caller import Caller
from nylorun.service.a2a.refusals import over_quota


class PushConfigs(ServiceBase):
    def create_push_config(self, caller: Caller, request: CreatePushConfigRequest) -> JsonObject:
        self._require_push()
        record = self._owned(caller.owner, request.task_id)
        config = TaskPushNotificationConfig.model_validate(request.model_dump())
        self._check_push_config(config)
        # Decision: a config on a task that has ended is accepted (A2A allows it; the TCK's push tests do it).
        # It sends nothing (an ended task changes no more) and, like every config (a config lives as long as
        # its task), expires with its task (docs/operate.md#data-retention).
        saved = self._save_push_config(request.task_id, config, caller, record.expires_at)
        return _redacted(saved).wire()

    def get_push_config(self, caller: Caller, request: TaskIdRequest) -> JsonObject:
        self._require_push()
        self._owned(caller.owner, request.task_id)
        stored = self._store.get_push_config(request.task_id, request.id)
        if stored is None:
            raise TaskNotFoundError(f"Push notification config {request.id} not found")
        return _redacted(stored.config).wire()

    def list_push_configs(self, caller: Caller, request: ListPushConfigsRequest) -> JsonObject:
        self._require_push()
        self._owned(caller.owner, request.task_id)
        configs = [_redacted(c.config) for c in self._store.list_push_configs(request.task_id)]
        start = _offset(request.task_id, request.page_token)
        size = request.page_size or 50
        page = configs[start : start + size]
        token = _offset_token(request.task_id, start + size) if start + size < len(configs) else None
        return ListPushConfigsResponse(configs=page, next_page_token=token).wire()

    def delete_push_config(self, caller: Caller, request: TaskIdRequest) -> JsonObject:
        self._require_push()
        self._owned(caller.owner, request.task_id)
        self._store.delete_push_config(request.task_id, request.id)  # idempotent: absent is fine
        return {}

    def _require_push(self) -> None:
        if not self._settings.push_enabled:
            # Profile v2: push configs only when the Runtime has a push secret.
            raise PushNotificationNotSupportedError("This Runtime has no push secret: push notifications are off")

    def _check_push_config(self, config: TaskPushNotificationConfig) -> None:
        self._require_push()
        try:
            check_push_url(
                config.url,
                allowed_hosts=self._settings.push_allowed_hosts,
                http_hosts=self._settings.push_http_hosts,
            )
        except PushUrlRejected as exc:
            raise InvalidParamsError(str(exc), field_violations=[("url", str(exc))]) from None

    @staticmethod
    def _stored_push_config(
        config: TaskPushNotificationConfig, caller: Caller, expires_at: int | None = None
    ) -> StoredPushConfig:
        saved = config.model_copy(update={"id": config.id or str(uuid.uuid4()), "tenant": None})
        # The caller's subject: its deliveries are signed with that subject's key
        # (docs/calling/push.md#your-signing-key).
        return StoredPushConfig(
            config=saved,
            created_at=now_timestamp(),
            extensions=caller.extensions,
            expires_at=expires_at,
            subject=caller.subject,
        )

    def _save_push_config(
        self,
        task_id: str,
        config: TaskPushNotificationConfig,
        caller: Caller,
        expires_at: int | None = None,
    ) -> TaskPushNotificationConfig:
        stored = with_task(self._stored_push_config(config, caller, expires_at), task_id)
        try:
            self._store.put_push_config(task_id, stored)
        except QuotaExceeded as over:
            raise over_quota(over) from None
        return stored.config


def _redacted(config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    """Push credentials are write-only: Get and List never return them."""
    auth = config.authentication
    return config.model_copy(
        update={"authentication": AuthenticationInfo(scheme=auth.scheme) if auth else None, "token": None}
    )


def _offset(task_id: str, token: str | None) -> int:
    """Where a push-config page starts; -32602 unless this Runtime issued the token for this task (page tokens
    are sealed: docs/decisions/0016-page-tokens-sealed.md)."""
    if not token:
        return 0
    offset, _, mac = token.partition(".")
    if offset.isascii() and offset.isdigit() and hmac.compare_digest(mac, _offset_mac(task_id, offset)):
        return int(offset)
    raise InvalidParamsError("pageToken is not valid", field_violations=[("pageToken", "Not valid.")])


def _offset_token(task_id: str, offset: int) -> str:
    return f"{offset}.{_offset_mac(task_id, str(offset))}"


def _offset_mac(task_id: str, offset: str) -> str:
    return RUNTIME_KEY.digest("config-page", f"{task_id}\n{offset}")[:32]
