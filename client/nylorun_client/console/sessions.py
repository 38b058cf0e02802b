"""What the console server keeps in memory for each open page: the Agents it connected to and their tokens."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import Any

from nylorun_client.webhooks import ReplayCache, Verifier

COOKIE = "nylorun_console"


@dataclass
class Connected:
    """One Agent the person connected to: the only places this session forwards to, with their token."""

    id: str
    url: str  # the Agent URL the person typed (normalised)
    rpc_url: str  # its card's JSON-RPC interface, on the same host as `url` unless the person allowed another
    token: str | None = field(repr=False)  # never sent to the page, never logged
    card: dict[str, Any]
    extensions: list[str]  # the Profile v2 URIs the card declares: empty means the core tier
    verifier: Verifier | None = None  # set when the Agent can push to this console (signed deliveries)
    watched: set[str] = field(default_factory=set)  # tasks with a push config pointing here


@dataclass
class Session:
    id: str
    agents: dict[str, Connected] = field(default_factory=dict)
    listeners: set[asyncio.Queue[dict[str, Any]]] = field(default_factory=set)
    replays: ReplayCache = field(default_factory=ReplayCache)

    def publish(self, event: dict[str, Any]) -> None:
        for queue in list(self.listeners):
            queue.put_nowait(event)


class Sessions:
    """Page sessions by their cookie value: created only by a visit that carries the per-run secret."""

    def __init__(self) -> None:
        self._all: dict[str, Session] = {}

    def new(self) -> Session:
        session = Session(secrets.token_urlsafe(32))
        self._all[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        return self._all.get(session_id or "")

    def by_agent(self, agent_id: str) -> tuple[Session, Connected] | None:
        """The session whose connected Agent has this id (a push receiver's path names the Agent, not the page)."""
        for session in self._all.values():
            if agent_id in session.agents:
                return session, session.agents[agent_id]
        return None
