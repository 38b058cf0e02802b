"""A2A and JSON-RPC errors, and the one table that maps them to the wire.

Every error a caller can see is one of these. Anything else is an internal error whose details stay in
the log: no stack trace reaches a caller.
"""

from __future__ import annotations

from typing import Any

ERROR_DOMAIN = "a2a-protocol.org"
PROFILE_DOMAIN = "docs.nylorun.com"


class A2AError(Exception):
    """An error with a JSON-RPC code, an ErrorInfo reason and optional caller-safe metadata."""

    code: int = -32603
    reason: str = "INTERNAL_ERROR"
    default_message: str = "Internal error"
    domain: str = ERROR_DOMAIN

    def __init__(
        self,
        message: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        field_violations: list[tuple[str, str]] | None = None,
        reason: str | None = None,
        domain: str | None = None,
    ) -> None:
        self.message = message or self.default_message
        self.metadata = metadata or {}
        self.field_violations = field_violations or []
        if reason:
            self.reason = reason
        if domain:
            self.domain = domain
        super().__init__(self.message)

    def to_jsonrpc(self) -> dict[str, Any]:
        """The JSON-RPC `error` object: ErrorInfo first in `data`, BadRequest after it when fields are wrong."""
        data: list[dict[str, Any]] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": self.reason,
                "domain": self.domain,
                "metadata": {k: _as_string(v) for k, v in self.metadata.items()},
            }
        ]
        if self.field_violations:
            data.append(
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [
                        {"field": field, "description": description}
                        for field, description in self.field_violations
                    ],
                }
            )
        return {"code": self.code, "message": self.message, "data": data}


def _as_string(value: Any) -> str:
    # google.rpc.ErrorInfo.metadata is map<string, string>.
    return value if isinstance(value, str) else str(value)


class ParseError(A2AError):
    code, reason, default_message = -32700, "PARSE_ERROR", "Invalid JSON payload"


class InvalidRequestError(A2AError):
    code, reason, default_message = -32600, "INVALID_REQUEST", "Request payload validation error"


class MethodNotFoundError(A2AError):
    code, reason, default_message = -32601, "METHOD_NOT_FOUND", "Method not found"


class InvalidParamsError(A2AError):
    code, reason, default_message = -32602, "INVALID_PARAMS", "Invalid parameters"


class InternalError(A2AError):
    code, reason, default_message = -32603, "INTERNAL_ERROR", "Internal error"


class TaskNotFoundError(A2AError):
    code, reason, default_message = -32001, "TASK_NOT_FOUND", "Task not found"


class TaskNotCancelableError(A2AError):
    code, reason, default_message = -32002, "TASK_NOT_CANCELABLE", "Task cannot be canceled"


class PushNotificationNotSupportedError(A2AError):
    code, reason = -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED"
    default_message = "Push Notification is not supported"


class UnsupportedOperationError(A2AError):
    code, reason, default_message = -32004, "UNSUPPORTED_OPERATION", "This operation is not supported"


class ContentTypeNotSupportedError(A2AError):
    code, reason, default_message = -32005, "CONTENT_TYPE_NOT_SUPPORTED", "Incompatible content types"


class ExtendedAgentCardNotConfiguredError(A2AError):
    code, reason = -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    default_message = "Extended agent card is not configured"


class VersionNotSupportedError(A2AError):
    code, reason, default_message = -32009, "VERSION_NOT_SUPPORTED", "A2A version not supported"


def context_busy(context_id: str, task_id: str | None) -> UnsupportedOperationError:
    """Profile v2: a message with `delivery: "reject"` in a busy context.

    The reason goes first in `data` *and* into `metadata`, because the a2a-sdk client surfaces only the
    first ErrorInfo's metadata.
    """
    metadata = {"reason": "CONTEXT_BUSY", "contextId": context_id}
    if task_id:
        metadata["taskId"] = task_id
    return UnsupportedOperationError(
        "Context is busy", reason="CONTEXT_BUSY", domain=PROFILE_DOMAIN, metadata=metadata
    )


def quota_exceeded(quota: str, limit: int, what: str) -> UnsupportedOperationError:
    """A per-subject quota refused the request and nothing was written (docs/security.md#quotas; why -32004:
    docs/decisions/0014-quota-error.md).

    Like CONTEXT_BUSY: an A2A code every client maps (-32004: the Runtime will not do this now), the quota's own
    reason under the profile's domain, and the quota's name and limit in `metadata`, where SDK clients look.
    """
    return UnsupportedOperationError(
        f"Quota {quota} reached: at most {limit} {what}",
        reason="QUOTA_EXCEEDED",
        domain=PROFILE_DOMAIN,
        metadata={"reason": "QUOTA_EXCEEDED", "quota": quota, "limit": limit},
    )
