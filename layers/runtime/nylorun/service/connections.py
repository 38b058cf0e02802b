"""The consent flow of a connection (docs/writing/connections.md): start it for the subject who asked,
complete it from the provider's redirect, resume the turn; list and revoke a caller's own connections.

Security model, in one place: the `state` sent to the provider is single-use (its digest keyed, deleted as it is
read), expires in START_SECONDS, and is bound to the subject, the task and the interaction it was made for and to
the browser that started it (a cookie whose digest it keeps); the code is exchanged with its PKCE S256 verifier
at the one redirect URI. Tokens are sealed before they are stored and reach no journal, log, event, answer or push.
"""

from __future__ import annotations

import hmac
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nylorun.domain.connections import (
    CONNECTION_PURPOSE,
    START_SECONDS,
    ConnectionKey,
    ConnectionStart,
    Provider,
    StoredConnection,
    covers,
    digest,
)
from nylorun.engine.connections import ConnectionDeps
from nylorun.observability import logger
from nylorun.ports import TaskRecord, TaskStore
from nylorun.ports.connections import OAuthFailed
from nylorun.profile.extensions import INTERACTIONS
from nylorun.protocol.errors import InvalidParamsError
from nylorun.protocol.models import JsonObject, Message, Part, Role

CALLBACK_PATH = "/v1/a2a/connections/callback"

Answer = Callable[[TaskRecord, Message, str, JsonObject], TaskRecord]


class ConnectRefused(Exception):
    """What the person's browser is told, as text: why this link or redirect connects nothing."""


@dataclass(frozen=True)
class Waiting:
    """A task waiting for a connection, as the page that starts it names it."""

    record: TaskRecord
    provider: Provider
    scopes: list[str]


class ConnectionFlow:
    def __init__(self, store: TaskStore, deps: ConnectionDeps, answer: Answer) -> None:
        self._store = store
        self._deps = deps
        self._answer = answer

    @property
    def redirect_uri(self) -> str:
        return self._deps.base_url.rstrip("/") + CALLBACK_PATH

    def waiting(self, task_id: str, interaction_id: str, subject: str | None = None) -> Waiting:
        """The task's open connection `interaction_id` (for `subject`, when the caller authenticated)."""
        record = self._store.get(task_id[:256])
        interaction = record.interaction if record is not None else None
        if (
            record is None
            or interaction is None
            or not record.state.interrupted
            or interaction.kind != "connection"
            or interaction.interaction_id != interaction_id
            or (subject is not None and record.owner.subject != subject)
        ):
            raise ConnectRefused("This link connects nothing: the task is not waiting for this connection any more.")
        detail = interaction.detail or {}
        provider = self._deps.providers.get(str(detail.get("connection")))
        if provider is None:
            raise ConnectRefused("This Runtime no longer declares that provider.")
        return Waiting(record, provider, [str(s) for s in detail.get("scopes", [])])

    def start(self, waiting: Waiting, browser: str) -> str:
        """A new single-use state for this browser, and the provider's consent page URL that carries it."""
        state, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(64)
        state_digest, record = digest(state), waiting.record
        sealer = self._deps.sealer
        assert record.interaction is not None
        start = ConnectionStart(
            state_digest=state_digest,
            owner=record.owner,
            task_id=record.task_id,
            interaction_id=record.interaction.interaction_id,
            provider=waiting.provider.name,
            scopes=tuple(waiting.scopes),
            sealed_verifier=sealer.seal(verifier, CONNECTION_PURPOSE, state_digest) if sealer else verifier,
            browser_digest=digest(browser),
            expires_at=int(self._deps.clock()) + START_SECONDS,
        )
        self._deps.store.put_start(start)
        return self._deps.oauth.authorization_url(waiting.provider, self.redirect_uri, waiting.scopes, state, verifier)

    def complete(self, state: str, code: str, browser: str) -> str:
        """The provider's redirect: the code exchanged, the tokens stored sealed, the interaction answered and the
        turn resumed. Returns the provider's title; ConnectRefused says why nothing was connected."""
        deps, now = self._deps, int(self._deps.clock())
        start = deps.store.take_start(digest(state[:512]), now)
        if start is None:
            raise ConnectRefused("This sign-in was already used, has expired, or was not started here. Nothing was connected.")
        if not hmac.compare_digest(start.browser_digest, digest(browser)):
            # Consent phishing: a link forwarded to someone else must not connect their account to the asker.
            logger.warning("connection refused: completed in another browser than the one that started it")
            raise ConnectRefused("This sign-in was started in another browser. Nothing was connected.")
        provider = deps.provider(start.provider)
        sealer = deps.sealer
        verifier = sealer.open(start.sealed_verifier, CONNECTION_PURPOSE, start.state_digest) if sealer else start.sealed_verifier
        try:
            tokens = deps.oauth.exchange(provider, self.redirect_uri, code, verifier)
        except OAuthFailed as refused:
            logger.warning("connection refused by the provider", extra={"provider": provider.name, "reason": str(refused)})
            raise ConnectRefused(f"{provider.label} did not connect the account ({refused}). Nothing was connected.") from None
        granted = str(tokens.get("scope") or " ".join(start.scopes)).split()
        key = ConnectionKey.of(start.owner, provider.name)
        deps.store.put_connection(
            StoredConnection(key, granted, deps.seal(key, tokens), connected_at=now, used_at=now), expect_version=None
        )
        logger.info("connection stored", extra={"provider": provider.name})
        self._resume(start, provider)
        return provider.label

    def abandon(self, state: str) -> None:
        """The provider redirected with an error: its state is used up (a new consent starts from the link)."""
        self._deps.store.take_start(digest(state[:512]), int(self._deps.clock()))

    def _resume(self, start: ConnectionStart, provider: Provider) -> None:
        record = self._store.get(start.task_id)
        if record is None or record.interaction is None or record.interaction.interaction_id != start.interaction_id:
            return  # answered, canceled or ended meanwhile: the connection is kept for the next turn
        answer = {"interactionId": start.interaction_id, "approved": True}
        message = Message(
            message_id=str(uuid.uuid4()), context_id=record.context_id, role=Role.USER,
            parts=[Part(text=f"Connected {provider.label}.")], metadata={INTERACTIONS: answer}, extensions=[INTERACTIONS],
        )
        self._answer(record, message, f"connection#{start.interaction_id}", {"approved": True})

    def connected(self, record: TaskRecord) -> bool:
        """Whether the subject has the connection the task's open interaction asks for (a typed `approved: true`
        counts only then)."""
        detail = (record.interaction.detail if record.interaction else None) or {}
        stored = self._deps.store.get_connection(ConnectionKey.of(record.owner, str(detail.get("connection"))))
        return stored is not None and covers(stored.scopes, [str(s) for s in detail.get("scopes", [])])

    def refuse_unconnected(self, record: TaskRecord) -> None:
        interaction = record.interaction
        if interaction is not None and not self.connected(record):
            url = (interaction.detail or {}).get("authorizationUrl", "the authorizationUrl in the interaction's detail")
            raise InvalidParamsError(
                f"`approved: true` does not connect an account: open {url} to connect it (the turn resumes by "
                "itself), or answer `approved: false` to decline",
                field_violations=[(f"message.metadata.{INTERACTIONS}.approved", "Connect through the authorizationUrl.")],
            )

    # ------------------------------------------------------------------ the caller's own connections
    def list(self, subject: str) -> list[dict[str, Any]]:
        return [
            {"agent": c.key.agent, "provider": c.key.provider, "scopes": c.scopes,
             "connectedAt": _iso(c.connected_at), "lastUsedAt": _iso(c.used_at)}
            for c in self._deps.store.list_connections(subject)
        ]

    def revoke(self, subject: str, agent: str, provider: str) -> bool:
        """Delete the tokens, then ask the provider to revoke them (when it has a revocation endpoint). False: the
        subject has no such connection."""
        key = ConnectionKey(subject, agent[:64], provider[:64])
        gone = self._deps.store.delete_connection(key)
        if gone is None:
            return False
        declared = self._deps.providers.get(key.provider)
        if declared is not None and declared.revoke_url:
            tokens = self._deps.open(gone)
            token = tokens.get("refresh_token") or tokens.get("access_token")
            try:
                self._deps.oauth.revoke(declared, str(token))
            except OAuthFailed as failed:  # deleted here either way; the provider's copy expires on its own
                logger.warning("provider revocation failed", extra={"provider": key.provider, "reason": str(failed)})
        return True


def _iso(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
