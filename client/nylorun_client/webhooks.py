"""`nylorun webhooks`: a local receiver for push deliveries, verified the Standard Webhooks way.

Each POST is checked with `standardwebhooks.Webhook(secret).verify(body, headers)` (webhook-id,
webhook-timestamp, webhook-signature) against each of the receiver's secrets. A verified delivery is printed and
answered 204; one that fails is answered 401 and the output says so, since a receiver that silently drops it
hides a wrong secret. A verified delivery whose webhook-id was already received within the timestamp tolerance
is a replay (or the Runtime's retry of one that arrived): answered 204 so a retry stops, but reported as a
duplicate and never passed on as new (Standard Webhooks: receivers dedupe on webhook-id).

The secrets never come from the command line (every process can read another's arguments): `--from
AGENT_URL` fetches the caller's own keys from the Runtime with its bearer token, `--secret-file` reads them from a
file, or `$NYLORUN_PUSH_SECRET` holds them (space-separated while rotating).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from standardwebhooks import Webhook, WebhookVerificationError

from nylorun_client import safe

_print_lock = threading.Lock()

# standardwebhooks refuses a webhook-timestamp more than 5 minutes old or ahead (its `webhook_tolerance`), so an
# id seen now can verify again for at most 2 x 5 minutes: kept that long, every replay that verifies is caught.
TOLERANCE_SECONDS = 300
PUSH_SIGNING_PATH = "push-signing-secrets"
# After a failed signature, keys from --from are fetched again (a Runtime secret may have rotated), at most this often.
REFETCH_SECONDS = 60


class SecretsUnavailable(Exception):
    """The receiver has no usable secret: say why in one line."""


class ReplayCache:
    """The webhook-ids received within the tolerance window (thread-safe: the server answers in threads)."""

    def __init__(self, keep_seconds: float = 2 * TOLERANCE_SECONDS, clock: Callable[[], float] = time.monotonic):
        self._keep = keep_seconds
        self._clock = clock
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def first_time(self, webhook_id: str) -> bool:
        now = self._clock()
        with self._lock:
            self._seen = {key: at for key, at in self._seen.items() if now - at < self._keep}
            if webhook_id in self._seen:
                return False
            self._seen[webhook_id] = now
            return True


def signing_secrets_url(agent_url: str) -> str:
    """`…/v1/a2a/agents/support/` → `…/v1/a2a/push-signing-secrets`: the endpoint sits beside the Agents."""
    match = re.fullmatch(r"(https?://[^?#]*?)/agents(?:/[^/?#]+)?/?", agent_url.strip())
    if match is None:
        raise SecretsUnavailable(f"{agent_url!r} is not an Agent URL (…/v1/a2a/agents/NAME)")
    return f"{match[1]}/{PUSH_SIGNING_PATH}"


def fetch_signing_secrets(agent_url: str, token: str | None) -> list[str]:
    """The caller's own signing keys, newest first (`GET /v1/a2a/push-signing-secrets` with its token)."""
    url = signing_secrets_url(agent_url)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        answer = httpx.get(url, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        raise SecretsUnavailable(f"{type(exc).__name__}: {exc} ({url})") from None
    if answer.status_code in (401, 403):
        hint = "this token was refused: check" if token else "give a bearer token with"
        raise SecretsUnavailable(f"HTTPError: {answer.status_code} from {url} ({hint} --token or NYLORUN_TOKEN)")
    if answer.status_code != 200:
        reason = answer.json().get("error", "") if "json" in answer.headers.get("content-type", "") else ""
        raise SecretsUnavailable(f"HTTPError: {answer.status_code} from {url}" + (f": {reason}" if reason else ""))
    secrets = [str(s) for s in answer.json().get("secrets", [])]
    if not secrets:
        raise SecretsUnavailable(f"{url} gave no signing secret")
    return secrets


def read_secret_file(path: str) -> list[str]:
    """Secrets from a file, whitespace-separated (one, or the new and the old while rotating)."""
    try:
        secrets = Path(path).read_text().split()
    except OSError as exc:
        raise SecretsUnavailable(f"cannot read the secret file {path}: {exc.strerror}") from None
    if not secrets:
        raise SecretsUnavailable(f"the secret file {path} is empty")
    return secrets


class Verifier:
    """Verifies a delivery with any of the current secrets; `refetch` (for --from) gets them again after a
    failure, at most every REFETCH_SECONDS, so a rotated Runtime secret does not need a restart."""

    def __init__(self, secrets: list[str], refetch: Callable[[], list[str]] | None = None) -> None:
        self._webhooks = _webhooks(secrets)
        self._refetch = refetch
        self._fetched_at = time.monotonic()
        self._lock = threading.Lock()

    def failure(self, body: bytes, headers: dict[str, str]) -> str | None:
        """None when a current secret verifies the delivery, else why not."""
        failure = _first_failure(self._webhooks, body, headers)
        if failure is None or self._refetch is None:
            return failure
        with self._lock:
            if time.monotonic() - self._fetched_at < REFETCH_SECONDS:
                return failure
            self._fetched_at = time.monotonic()
            try:
                self._webhooks = _webhooks(self._refetch())
            except SecretsUnavailable:
                return failure
        return _first_failure(self._webhooks, body, headers)


def _webhooks(secrets: list[str]) -> list[Webhook]:
    try:
        return [Webhook(secret) for secret in secrets]
    except Exception as exc:  # noqa: BLE001 (not base64 after "whsec_", or empty: all mean a bad secret)
        raise SecretsUnavailable(f"InvalidSecret: the webhook secret is not a Standard Webhooks secret ({exc})") from None


def _first_failure(webhooks: list[Webhook], body: bytes, headers: dict[str, str]) -> str | None:
    failure = "no secret"
    for webhook in webhooks:
        try:
            webhook.verify(body, headers, json_parse=False)
            return None
        except WebhookVerificationError as exc:
            failure = str(exc)
        except Exception:  # noqa: BLE001 (a malformed signature or a non-UTF-8 body breaks the parsing)
            failure = "malformed webhook-signature header or body"
    return failure


def serve_webhooks(host: str, port: int, verifier: Verifier, *, json_lines: bool = False) -> int:
    replays = ReplayCache()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            webhook_id = headers.get("webhook-id", "?")
            failure = verifier.failure(body, headers)
            if failure is not None:
                _report(
                    json_lines,
                    {"type": "delivery", "verified": False, "webhookId": webhook_id, "error": failure},
                )
                self._answer(401, b'{"error":"signature verification failed"}')
                return
            # Checked only once the signature holds: an unsigned request cannot claim a real delivery's id first.
            if not replays.first_time(webhook_id):
                _report(json_lines, {"type": "duplicate", "verified": True, "webhookId": webhook_id})
                self._answer(204, b"")
                return
            _report(
                json_lines,
                {
                    "type": "delivery",
                    "verified": True,
                    "webhookId": webhook_id,
                    "timestamp": headers.get("webhook-timestamp"),
                    "path": self.path,
                    "body": _decode(body),
                },
            )
            self._answer(204, b"")

        def _answer(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            if payload:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # each delivery is reported once, by _report, not also as an access log line

    server = ThreadingHTTPServer((host, port), Receiver)
    bound = server.server_address[1]
    if json_lines:
        _write_json({"type": "listening", "url": f"http://{host}:{bound}/"})
    else:
        _write(f"Listening on http://{host}:{bound}/ for push deliveries (Standard Webhooks); Ctrl-C stops.")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _report(json_lines: bool, delivery: dict[str, Any]) -> None:
    if json_lines:
        _write_json(delivery)
    elif delivery["type"] == "duplicate":
        _write(f"↺ REPLAY of delivery {delivery['webhookId']}: already received, ignored (answered 204)")
    elif delivery["verified"]:
        body = delivery["body"]
        _write(
            f"✓ delivery {delivery['webhookId']} verified: {_summary(body)}\n  "
            f"{json.dumps(body) if not isinstance(body, str) else body}"
        )
    else:
        _write(f"✗ SIGNATURE FAILED for delivery {delivery['webhookId']}: {delivery['error']} (answered 401)")


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")


def _summary(body: Any) -> str:
    """One A2A StreamResponse per delivery (docs/protocol.md §8.3): say which member and the task's state."""
    if not isinstance(body, dict):
        return "a non-JSON body"
    for member in ("statusUpdate", "task", "artifactUpdate", "message"):
        event = body.get(member)
        if isinstance(event, dict):
            task_id = event.get("taskId") or event.get("id") or ""
            state = (
                (event.get("status") or {}).get("state") or (event.get("artifact") or {}).get("name") or ""
            )
            return " ".join(part for part in (member, task_id, state) if part)
    return "keys " + ", ".join(sorted(body)) if body else "an empty object"


def _write(line: str) -> None:
    # A delivery's body, id and path are the sender's: no control sequence of theirs reaches the terminal.
    with _print_lock:
        print(safe.clean(line), flush=True)


def _write_json(obj: dict[str, Any]) -> None:
    _write(safe.dumps(obj))
