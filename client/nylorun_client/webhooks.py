"""`nylorun webhooks`: a local receiver for push deliveries, verified the Standard Webhooks way.

Each POST is checked with `standardwebhooks.Webhook(secret).verify(body, headers)` (webhook-id,
webhook-timestamp, webhook-signature). A verified delivery is printed and answered 204; one that fails is
answered 401 and the output says so, since a receiver that silently drops it hides a wrong secret.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError

_print_lock = threading.Lock()


def serve_webhooks(host: str, port: int, secret: str, *, json_lines: bool = False) -> int:
    try:
        verifier = Webhook(secret)
    except Exception as exc:  # noqa: BLE001 (not base64 after "whsec_", or empty: all mean a bad secret)
        print(f"InvalidSecret: the webhook secret is not a Standard Webhooks secret ({exc})", file=sys.stderr)
        return 1

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            webhook_id = headers.get("webhook-id", "?")
            try:
                verifier.verify(body, headers, json_parse=False)
                failure = None
            except WebhookVerificationError as exc:
                failure = str(exc)
            except Exception:  # noqa: BLE001 (a malformed signature or a non-UTF-8 body breaks the parsing)
                failure = "malformed webhook-signature header or body"
            if failure is not None:
                _report(
                    json_lines,
                    {"type": "delivery", "verified": False, "webhookId": webhook_id, "error": failure},
                )
                self._answer(401, b'{"error":"signature verification failed"}')
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
    with _print_lock:
        print(line, flush=True)


def _write_json(obj: dict[str, Any]) -> None:
    _write(json.dumps(obj, ensure_ascii=False))
