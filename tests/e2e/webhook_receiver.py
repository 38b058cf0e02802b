"""A webhook receiver for end-to-end tests: a real HTTP server on loopback that verifies each push
delivery's Standard Webhooks signature with the `standardwebhooks` package and records it.

It verifies with the caller's own keys, as a receiver gets them: `own_secrets` asks the Runtime's
`GET /v1/a2a/push-signing-secrets` with the caller's token (per-subject signing keys: docs/calling/push.md)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def own_secrets(base_url: str, token: str) -> list[str]:
    """The keys that sign this caller's deliveries, newest first."""
    answer = httpx.get(
        f"{base_url}/v1/a2a/push-signing-secrets", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    answer.raise_for_status()
    return list(answer.json()["secrets"])


class Receiver:
    """A webhook receiver on loopback: verifies each request's signature, records it, answers as told."""

    def __init__(
        self,
        secrets: str | list[str],
        answers: Callable[[int], tuple[int, dict[str, str]]] | None = None,
        port: int = 0,
    ) -> None:
        self.secrets = [secrets] if isinstance(secrets, str) else secrets
        self.answers = answers or (lambda n: (200, {}))
        self.requests: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                verified = any(receiver.verifies(secret, body, dict(self.headers.items())) for secret in receiver.secrets)
                receiver.requests.append(
                    {"verified": verified, "headers": dict(self.headers.items()), "body": json.loads(body)}
                )
                status, headers = receiver.answers(len(receiver.requests))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"

    @staticmethod
    def verifies(secret: str, body: bytes, headers: dict[str, str]) -> bool:
        try:
            Webhook(secret).verify(body, headers)
            return True
        except (WebhookVerificationError, ValueError):  # ValueError: a malformed signature
            return False

    def wait(self, count: int, timeout: float = 20) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.requests

    def close(self) -> None:
        self.server.shutdown()
