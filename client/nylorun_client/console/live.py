"""Live updates: a push config pointing at this console, each delivery's signature verified, relayed as SSE."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from nylorun_client.console.forward import forward
from nylorun_client.console.guard import LOOPBACK_NAMES, host_name
from nylorun_client.console.sessions import Connected, Session
from nylorun_client.webhooks import SecretsUnavailable, Verifier, fetch_signing_secrets

KEEPALIVE_SECONDS = 15.0


async def push_mode(agent: Connected) -> str:
    """"push" when the Agent can reach this console and sign for this caller, else "poll" (with the reason).

    Only an Agent on this machine can reach a loopback receiver (a local Runtime); its keys come from the Runtime's
    push-signing-secrets route with the caller's own token, so only deliveries signed for this caller verify."""
    if not (agent.card.get("capabilities") or {}).get("pushNotifications"):
        return "poll: the card says pushNotifications: false"
    if host_name(urlsplit(agent.rpc_url).netloc) not in LOOPBACK_NAMES:
        return "poll: the Agent is not on this machine, so it cannot reach the console"
    try:
        secrets = await asyncio.to_thread(fetch_signing_secrets, agent.url, agent.token)
        agent.verifier = Verifier(secrets, refetch=lambda: fetch_signing_secrets(agent.url, agent.token))
    except SecretsUnavailable as exc:
        return f"poll: no signing keys ({exc})"
    return "push"


async def watch(agent: Connected, task_id: str, receiver: str) -> dict[str, Any]:
    """Register one push config for the task pointing at `receiver` (once per task)."""
    if agent.verifier is None or task_id in agent.watched:
        return {"exchanges": []}
    page = await forward(agent, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": receiver})
    if "error" not in page:
        agent.watched.add(task_id)
    return page


def receive(session: Session, agent: Connected, body: bytes, headers: dict[str, str]) -> int:
    """A delivery: 401 when no key of this caller verifies it; a verified replay is dropped; else relayed."""
    if agent.verifier is None or agent.verifier.failure(body, headers) is not None:
        return 401
    if session.replays.first_time(headers.get("webhook-id", "")):
        try:
            delivery = json.loads(body)
        except ValueError:
            delivery = None
        session.publish({"agent": agent.id, "webhookId": headers.get("webhook-id"), "delivery": delivery})
    return 204


async def events(session: Session) -> AsyncIterator[str]:
    """Server-sent events: one `data:` line per verified delivery, a comment now and then to keep it open."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    session.listeners.add(queue)
    try:
        yield ": live\n\n"
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            yield f"data: {json.dumps(event)}\n\n"
    finally:
        session.listeners.discard(queue)
