"""A2A 1.0 JSON-RPC client for delegation (the `Delegates` port; docs/writing/delegation.md).

Every request says `A2A-Version: 1.0` (a strict 1.0 peer refuses a request without it: -32009) and activates
the Nylorun profile's five extensions, so a Nylorun delegate's interactions, telemetry and files come back typed.
The URL is the delegating Agent's author's (code, not a caller's input), so no address check is made; redirects
are not followed (a JSON-RPC POST must not be replayed elsewhere) and every request has one deadline.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import urllib3

from nylorun.ports.delegation import MAX_READ_BYTES, AnswerTooLarge, DelegateUnavailable
from nylorun.profile.extensions import PROFILE_EXTENSIONS

if TYPE_CHECKING:
    from nylorun.ports.delegation import Delegates

SIGNING_PATH = "/v1/a2a/push-signing-secrets"  # a Nylorun Runtime's, beside its /v1/a2a/agents/


class A2aClient:
    def __init__(self, timeout_seconds: float = 10.0) -> None:
        self._http = urllib3.PoolManager(
            timeout=urllib3.Timeout(total=timeout_seconds), retries=False, headers={"A2A-Version": "1.0"}
        )

    def _rpc(self, url: str, headers: dict[str, str], method: str, params: dict[str, Any]) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params})
        try:
            response = self._http.request(
                "POST",
                url,
                body=body.encode(),
                headers={
                    **headers,
                    "Content-Type": "application/json",
                    "A2A-Version": "1.0",
                    "A2A-Extensions": ",".join(PROFILE_EXTENSIONS),
                },
                redirect=False,
                preload_content=False,
            )
            data = _capped(response)
        except urllib3.exceptions.HTTPError as exc:
            raise DelegateUnavailable(f"{method}: {type(exc).__name__}") from exc
        try:
            answer = json.loads(data)
        except ValueError:
            raise DelegateUnavailable(f"{method}: HTTP {response.status}, not JSON") from None
        if not isinstance(answer, dict):
            raise DelegateUnavailable(f"{method}: HTTP {response.status}, not a JSON-RPC response")
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            code = error.get("code")
            raise DelegateUnavailable(f"{method}: error {code}", code if isinstance(code, int) else None)
        if response.status != 200 or "result" not in answer:
            raise DelegateUnavailable(f"{method}: HTTP {response.status}")
        return answer["result"]

    def send(self, url: str, headers: dict[str, str], params: dict[str, Any]) -> dict[str, Any]:
        return dict(self._rpc(url, headers, "SendMessage", params))

    def get_task(self, url: str, headers: dict[str, str], task_id: str) -> dict[str, Any]:
        return dict(self._rpc(url, headers, "GetTask", {"id": task_id, "historyLength": 0}))

    def find_tasks(self, url: str, headers: dict[str, str], context_id: str) -> list[dict[str, Any]]:
        result = self._rpc(url, headers, "ListTasks", {"contextId": context_id, "pageSize": 10})
        return list(result.get("tasks") or [])

    def cancel(self, url: str, headers: dict[str, str], task_id: str) -> dict[str, Any]:
        return dict(self._rpc(url, headers, "CancelTask", {"id": task_id}))

    def signing_keys(self, url: str, headers: dict[str, str]) -> list[str]:
        parts = urlsplit(url)
        keys_url = urlunsplit((parts.scheme, parts.netloc, SIGNING_PATH, "", ""))
        try:
            response = self._http.request("GET", keys_url, headers=headers, redirect=False, preload_content=False)
            data = _capped(response)
        except urllib3.exceptions.HTTPError as exc:
            raise DelegateUnavailable(f"signing keys: {type(exc).__name__}") from exc
        if response.status != 200:
            return []  # not a Nylorun Runtime, or push is off there: no verifiable callbacks
        try:
            secrets = json.loads(data).get("secrets")
        except (ValueError, AttributeError):
            return []
        return [s for s in secrets if isinstance(s, str)] if isinstance(secrets, list) else []


def _capped(response: urllib3.BaseHTTPResponse) -> bytes:
    """The body, read up to `MAX_READ_BYTES`: a larger answer is not read into memory (`AnswerTooLarge`)."""
    data = response.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        response.close()  # the rest is never read: the connection is not reused
        raise AnswerTooLarge(f"answer over {MAX_READ_BYTES} bytes")
    response.release_conn()
    return bytes(data)


if TYPE_CHECKING:  # mypy fails here when the port changes and this adapter does not follow
    _client: Delegates = A2aClient()
