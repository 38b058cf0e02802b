"""What the console server keeps in memory for each open page: the Agents it connected to and their tokens."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nylorun_client.webhooks import ReplayCache, Verifier

COOKIE = "nylorun_console"
# A page left open overnight keeps working; one unused for longer loses its tokens (docs/console.md, "Sessions").
IDLE_SECONDS = 12 * 3600


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
    seen: float = 0.0  # when the page last used it (the Sessions clock)
    agents: dict[str, Connected] = field(default_factory=dict)
    listeners: set[asyncio.Queue[dict[str, Any]]] = field(default_factory=set)
    replays: ReplayCache = field(default_factory=ReplayCache)

    def publish(self, event: dict[str, Any]) -> None:
        for queue in list(self.listeners):
            queue.put_nowait(event)


class Sessions:
    """Page sessions by their cookie value: created only by a visit that carries the per-run secret, and forgotten
    (with the Agents and tokens they hold) after `idle` seconds unused."""

    def __init__(self, *, idle: float = IDLE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._all: dict[str, Session] = {}
        self._idle = idle
        self._clock = clock

    def new(self) -> Session:
        self._expire()
        session = Session(secrets.token_urlsafe(32), seen=self._clock())
        self._all[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The page's session, its idle time starting again; None when it never was or has expired."""
        self._expire()
        session = self._all.get(session_id or "")
        if session is not None:
            session.seen = self._clock()
        return session

    def by_agent(self, agent_id: str) -> tuple[Session, Connected] | None:
        """The session whose connected Agent has this id (a push receiver's path names the Agent, not the page).
        A delivery does not keep a session alive: only the page using it does."""
        self._expire()
        for session in self._all.values():
            if agent_id in session.agents:
                return session, session.agents[agent_id]
        return None

    def _expire(self) -> None:
        # An expired session's push receivers then answer 410 Gone, and the Runtime stops sending (Standard Webhooks).
        now = self._clock()
        for session_id in [s.id for s in self._all.values() if now - s.seen > self._idle]:
            del self._all[session_id]
