"""One line in the server's own words for each expected failure of a client command (never a traceback)."""

from __future__ import annotations

from typing import Any

import httpx
from a2a.client import A2AClientError
from a2a.utils.errors import A2AError

from nylorun_client.client import ClientError

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def error_line(exc: BaseException, url: str, *, server_error: Any = None, token_given: bool = False) -> str | None:
    """The A2A error's name, message and reason, or the HTTP status with the body's message; None for a bug.

    `server_error` is the `error` member of the failed answer's JSON body (NylorunClient.last_error): a JSON-RPC
    error object, or the Runtime's `{"error": "…"}` of an HTTP error.
    """
    if isinstance(exc, A2AClientError) and isinstance(exc.__cause__, httpx.HTTPStatusError):
        response = exc.__cause__.response
        said = _message(server_error)
        line = f"HTTPError: {response.status_code} {response.reason_phrase} from {response.request.url}"
        line += f": {said}" if said else ""
        if response.status_code in (401, 403):
            line += (
                " (this token was refused: check --token or NYLORUN_TOKEN)"
                if token_given
                else " (give a bearer token with --token or NYLORUN_TOKEN)"
            )
        return line
    if isinstance(exc, A2AClientError):  # the card unreadable, a timeout, an answer that is not JSON-RPC
        return f"{type(exc).__name__}: {_first_line(exc.message)}"
    if isinstance(exc, A2AError):
        # a2a-1.0.md §7: the reason is the first ErrorInfo's in `data`; the a2a-sdk keeps only its metadata.
        reason = _reason(server_error) or (exc.data or {}).get("reason")
        return f"{type(exc).__name__}: {exc.message}" + (f" ({reason})" if reason else "")
    if isinstance(exc, ClientError):
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, httpx.HTTPError):
        return f"{type(exc).__name__}: {_first_line(str(exc))} ({url})"
    return None


def error_words(error: Any) -> str:
    """A JSON-RPC error object (or the Runtime's `{"error": "…"}` text) as words: its message and reason."""
    reason = _reason(error)
    code = f" [{error['code']}]" if isinstance(error, dict) and isinstance(error.get("code"), int) else ""
    return (_message(error) or "an error with no message") + code + (f" ({reason})" if reason else "")


def _message(error: Any) -> str:
    if isinstance(error, str):
        return _first_line(error)
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return _first_line(error["message"])
    return ""


def _reason(error: Any) -> str | None:
    details = error.get("data") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, dict) and detail.get("@type") == ERROR_INFO and detail.get("reason"):
            return str(detail["reason"])
    return None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
