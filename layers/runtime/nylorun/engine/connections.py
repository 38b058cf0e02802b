"""`turn.connection(...)`: the person's connected account at a provider the stack declares, asked for once
(Profile v2: `AUTH_REQUIRED`, kind `connection`) and used through `Connection` (docs/writing/connections.md).

What the journal keeps of it is whether the account was connected when the turn first asked, and the person's
answer: never a token. Tokens are read from the connection store when the Agent's code uses them, refreshed when
they are about to expire, and written back only if no other turn refreshed first (a conditional write).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode

from nylorun.domain.connections import (
    CONNECTION_PURPOSE,
    REFRESH_MARGIN_SECONDS,
    TOUCH_SECONDS,
    ConnectionKey,
    Provider,
    StoredConnection,
    covers,
)
from nylorun.domain.ids import Owner
from nylorun.engine import handover
from nylorun.ports import Sealer
from nylorun.ports.connections import ConnectionStore, OAuthClient, OAuthFailed, Tokens

START_PATH = "/v1/a2a/connections/start"
CHECK_EFFECT = "connection:"  # the journaled look at the store: {"connected": bool}, never a token


class UnknownConnection(handover.BadTurnArgument):
    """The Agent asked for a provider the stack does not declare: an error in the Agent's code."""


class ConnectionLost(Exception):
    """The connection was revoked (or expired) after the turn had it, or the provider refused to refresh it:
    the Agent's code decides what to tell the person (the next turn asks again)."""


@dataclass
class ConnectionDeps:
    store: ConnectionStore
    oauth: OAuthClient
    providers: dict[str, Provider]
    sealer: Sealer | None
    base_url: str  # where the Runtime's api answers: authorizationUrl starts there
    clock: Callable[[], float] = time.time

    def seal(self, key: ConnectionKey, tokens: Tokens) -> str:
        text = json.dumps(tokens, separators=(",", ":"))
        return self.sealer.seal(text, CONNECTION_PURPOSE, key.about) if self.sealer else text

    def open(self, stored: StoredConnection) -> Tokens:
        text = stored.sealed_tokens
        opened = self.sealer.open(text, CONNECTION_PURPOSE, stored.key.about) if self.sealer else text
        tokens: Tokens = json.loads(opened)
        return tokens

    def provider(self, name: str) -> Provider:
        found = self.providers.get(name)
        if found is None:
            declared = ", ".join(sorted(self.providers)) or "none"
            raise UnknownConnection(f"turn.connection: the stack declares no provider {name!r} (declared: {declared})")
        return found


class Declined:
    """The person declined to connect (a typed `approved: false`): falsy, so `if not connection:` handles it."""

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def __bool__(self) -> Literal[False]:  # mypy narrows `if not connection:` to Connection after it
        return False

    def __repr__(self) -> str:
        return f"Declined({self.provider!r})"


class Connection:
    """The person's connected account: `headers()` for a call, or `client()` (an httpx.Client) that sends them."""

    def __init__(self, deps: ConnectionDeps, key: ConnectionKey) -> None:
        self._deps = deps
        self.key = key
        self.provider = key.provider

    def __repr__(self) -> str:  # never a token, whatever prints it
        return f"Connection({self.provider!r})"

    def access_token(self) -> str:
        """A current access token: refreshed first when it expires within a minute."""
        deps = self._deps
        for attempt in range(3):
            stored = deps.store.get_connection(self.key)
            if stored is None:
                raise ConnectionLost(f"the {self.provider} connection was revoked or has expired")
            tokens, now = deps.open(stored), int(deps.clock())
            if now - stored.used_at > TOUCH_SECONDS:
                deps.store.touch_connection(self.key, now)
            expires_at = tokens.get("expires_at")
            # A token just refreshed is used while it lasts, however short its life (no refresh loop).
            margin = REFRESH_MARGIN_SECONDS if attempt == 0 else 0
            if expires_at is None or int(expires_at) - margin > now:
                return str(tokens["access_token"])
            if self._refreshed(stored, tokens, now):
                continue  # read again: the token this turn wrote, or the one a racing turn wrote first
        raise ConnectionLost(f"the {self.provider} connection could not be refreshed")

    def _refreshed(self, stored: StoredConnection, tokens: Tokens, now: int) -> bool:
        refresh_token = tokens.get("refresh_token")
        if not refresh_token:
            raise ConnectionLost(f"the {self.provider} connection expired and cannot be refreshed")
        deps = self._deps
        try:
            fresh = deps.oauth.refresh(deps.provider(self.provider), str(refresh_token))
        except OAuthFailed:
            # A racing turn may have refreshed with the same refresh token (a provider that rotates it refuses the
            # second): look again before calling the connection lost.
            latest = deps.store.get_connection(self.key)
            if latest is not None and latest.version != stored.version:
                return True
            raise ConnectionLost(f"the provider refused to refresh the {self.provider} connection") from None
        fresh.setdefault("refresh_token", refresh_token)
        written = StoredConnection(self.key, stored.scopes, deps.seal(self.key, fresh), stored.version, stored.connected_at, now)
        deps.store.put_connection(written, expect_version=stored.version)  # lost the race: the winner's is read
        return True

    def headers(self) -> dict[str, str]:
        """`{"Authorization": "Bearer <current access token>"}` for a call to the provider's API."""
        return {"Authorization": f"Bearer {self.access_token()}"}

    def client(self, **options: Any) -> Any:
        """An httpx.Client that sends this connection's current token (close it, or use it in a `with`)."""
        import httpx

        return httpx.Client(headers={**options.pop("headers", {}), **self.headers()}, **options)

    def __bool__(self) -> Literal[True]:
        return True


def authorization_url(deps: ConnectionDeps, task_id: str, interaction_id: str) -> str:
    """The Runtime's page that starts this interaction's consent (api/connections.py): it names the subject and
    the Agent before the provider's page opens, and makes the single-use state there, not here."""
    return f"{deps.base_url.rstrip('/')}{START_PATH}?{urlencode({'task': task_id, 'interaction': interaction_id})}"


def connect(
    deps: ConnectionDeps | None,
    owner: Owner,
    effect: Callable[[str, Callable[[str], Any]], Any],
    ask: Callable[[dict[str, Any]], dict[str, Any]],
    name: str,
    scopes: Sequence[str],
) -> Connection | Declined:
    """The connection `name` with `scopes`: at once when the person has it, else after they connect (the turn
    waits AUTH_REQUIRED); Declined when they say no. `effect` journals the look at the store, `ask` the question
    (with the detail it is given)."""
    if deps is None:
        raise UnknownConnection(f"turn.connection: this Runtime declares no connection providers (asked for {name!r})")
    provider = deps.provider(name)
    wanted = sorted({*provider.scopes, *scopes})
    key = ConnectionKey.of(owner, name)

    def look(_key: str) -> dict[str, bool]:
        stored = deps.store.get_connection(key)
        return {"connected": stored is not None and covers(stored.scopes, wanted)}

    if effect(f"{CHECK_EFFECT}{name}", look)["connected"]:
        return Connection(deps, key)  # Already connected with those scopes: no question at all.
    answer = ask({"connection": name, "provider": provider.label, "scopes": wanted})
    return Connection(deps, key) if answer.get("approved") else Declined(name)


def check_declared(agents: Sequence[Any], providers: dict[str, Provider]) -> None:
    """Where it can be known at load time: each Agent's declared `connections` are providers of this stack."""
    for agent in agents:
        missing = [name for name in agent.connections if name not in providers]
        if missing:
            declared = ", ".join(sorted(providers)) or "none"
            raise UnknownConnection(
                f"Agent {agent.name!r} asks for connection {missing[0]!r}, which this stack does not declare "
                f"(declared: {declared}; see docs/writing/connections.md, Providers)"
            )
