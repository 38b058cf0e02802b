"""The ports a connection needs: where connected accounts and consents in flight are kept, and the OAuth 2.0 client
that speaks to a provider (docs/writing/connections.md)."""

from __future__ import annotations

from typing import Any, Protocol

from nylorun.domain.connections import ConnectionKey, ConnectionStart, Provider, StoredConnection

Tokens = dict[str, Any]  # a provider's token response (access_token, refresh_token, expires_at, …)


class OAuthFailed(Exception):
    """The provider refused (a bad or used code, a revoked refresh token) or could not be reached. The text is
    the OAuth error code at most, never a token."""


class ConnectionStore(Protocol):
    def get_connection(self, key: ConnectionKey) -> StoredConnection | None: ...

    def put_connection(self, connection: StoredConnection, *, expect_version: int | None) -> bool:
        """Write it (its version one past `expect_version`); False when the stored version is not
        `expect_version` (another turn refreshed first). `expect_version=None` replaces whatever is there."""
        ...

    def touch_connection(self, key: ConnectionKey, used_at: int) -> None:
        """Mark it used now: its expiry (unused connections are deleted) moves on."""
        ...

    def delete_connection(self, key: ConnectionKey) -> StoredConnection | None:
        """Delete it; the connection that was there, or None."""
        ...

    def list_connections(self, subject: str) -> list[StoredConnection]: ...

    def count_connections(self) -> dict[tuple[str, str], int]:
        """How many connections each (Agent, provider) has (what an operator sees: counts, never tokens)."""
        ...

    def put_start(self, start: ConnectionStart) -> None: ...

    def take_start(self, state_digest: str, now: int) -> ConnectionStart | None:
        """The consent started with this state, removed as it is read (single use); None when unknown, used
        already or expired."""
        ...


class OAuthClient(Protocol):
    def authorization_url(
        self, provider: Provider, redirect_uri: str, scopes: list[str], state: str, code_verifier: str
    ) -> str: ...

    def exchange(self, provider: Provider, redirect_uri: str, code: str, code_verifier: str) -> Tokens: ...

    def refresh(self, provider: Provider, refresh_token: str) -> Tokens: ...

    def revoke(self, provider: Provider, token: str) -> None: ...
