"""Figure 5b: push deliveries per second to a local receiver.

What one push function instance does per delivery, in-process and one after another: read the config (the
in-memory store), render the StreamResponse, sign it (Standard Webhooks), POST it with the Runtime's
WebhookSender (address checks, no redirects) to a receiver on 127.0.0.1 that answers 204. On AWS each
delivery also costs the SQS receive/delete and a DynamoDB read (figure 4 counts those).
"""

from __future__ import annotations

import http.server
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.adapters.webhooks import WebhookSender
from nylorun.ports import Delivery, StoredPushConfig
from nylorun.protocol.models import TaskPushNotificationConfig, now_timestamp
from nylorun.service.push import Outcome, PushService
from nylorun.settings import Settings

SECRET = "whsec_" + "YmVuY2gtcHVzaC1zZWNyZXQtMzItYnl0ZXMtbG9uZyE="


class Receiver(http.server.ThreadingHTTPServer):
    """Answers every POST with 204 and counts them."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ReceiverHandler)
        self.received = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _ReceiverHandler(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.received += 1
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


class _NoQueue:
    """A delivery that had to be retried or dead-lettered would be a failed measurement."""

    def send_deliveries(self, deliveries: Sequence[Delivery]) -> None:
        raise RuntimeError("unexpected re-queue")

    def send_fan_out(self, task_id: str, event_id: str, event: dict[str, Any]) -> None:
        raise RuntimeError("unexpected fan-out")

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        raise RuntimeError(f"delivery dead-lettered: {reason}")


def _delivery(task_id: str, config_id: str) -> Delivery:
    status = {
        "state": "TASK_STATE_COMPLETED",
        "timestamp": now_timestamp(),
        "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_AGENT", "parts": [{"text": "hello"}]},
    }
    return Delivery(
        event_id=str(uuid.uuid4()),
        task_id=task_id,
        config_id=config_id,
        kind="statusUpdate",
        payload={"taskId": task_id, "contextId": "ctx-bench", "status": status},
        first_attempt_at=time.time(),
    )


def run(seconds: float = 3.0, warmup: float = 0.5) -> dict[str, Any]:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.serve_forever, name="bench-push-receiver", daemon=True)
    thread.start()
    try:
        store = InMemoryTaskStore()
        task_id, config_id = "task-bench", "cfg-bench"
        config = TaskPushNotificationConfig(id=config_id, task_id=task_id, url=receiver.url, token="bench")
        store.put_push_config(task_id, StoredPushConfig(config=config, created_at=now_timestamp(), subject="bench"))
        settings = Settings(push_secret=SECRET, push_allow_loopback=True)
        sender = WebhookSender(timeout_seconds=settings.push_timeout_seconds, allow_loopback=True)
        push = PushService(store, sender, _NoQueue(), settings, lambda: [SECRET])
        for phase in (warmup, seconds):
            delivered = 0
            started = time.perf_counter()
            while time.perf_counter() - started < phase:
                result = push.deliver(_delivery(task_id, config_id), attempt=1)
                if result.outcome is not Outcome.DELIVERED:
                    raise RuntimeError(f"push delivery failed: {result}")
                delivered += 1
            elapsed = time.perf_counter() - started
    finally:
        receiver.shutdown()
        receiver.server_close()
    return {
        "deliveries_per_second": round(delivered / elapsed, 1),
        "deliveries": delivered,
        "received": receiver.received,
        "note": "one push function instance, in-process, sequential; the config read is in memory",
    }
