"""Connections (Profile v2: a missing connection is `AUTH_REQUIRED`, kind `connection`): the OAuth 2.0 providers
a stack declares, and how a person's connected account is keyed, stored and started.

Decision: a connection belongs to a subject *and* the Agent that asked (`ConnectionKey`), not to the subject across
every Agent: the person consented on a page naming one Agent, so another Agent of the same stack asks again. The
key has room for a narrower scope (a delegating Agent's original caller) beside the Agent, without a new layout.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from nylorun.domain.ids import Owner, subject_key

# The sealer's purpose for a connection's tokens (adapters/kms.py: the IAM grants name it).
CONNECTION_PURPOSE = "connection"
# Connections outlive tasks. One nobody used for this long is deleted (the table's TTL); each use moves it on.
CONNECTION_UNUSED_SECONDS = 90 * 24 * 3600
# How long a started consent (its single-use `state`) waits for the provider's redirect.
START_SECONDS = 15 * 60
# A use moves the expiry on at most this often (one write a day, not one per call).
TOUCH_SECONDS = 24 * 3600
# Refresh an access token this long before it expires, so a call made with it does not meet the expiry.
REFRESH_MARGIN_SECONDS = 60
NAME_PATTERN = r"^[a-z][a-z0-9-]{0,39}$"


class Provider(BaseModel):
    """An OAuth 2.0 provider the stack's owner declares (docs/writing/connections.md). `client_secret` only
    locally; deployed, it is the provider's entry in the ConnectionSecrets secret."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    name: str = Field(pattern=NAME_PATTERN)
    title: str = ""  # what a person reads ("Example Payments"); the name when empty
    authorize_url: str = Field(alias="authorizeUrl")
    token_url: str = Field(alias="tokenUrl")
    revoke_url: str | None = Field(default=None, alias="revokeUrl")
    client_id: str = Field(alias="clientId")
    client_secret: str | None = Field(default=None, alias="clientSecret", repr=False)
    scopes: list[str] = Field(default_factory=list)  # asked for on every connection, beside the Agent's

    @property
    def label(self) -> str:
        return self.title or self.name


@dataclass(frozen=True)
class ConnectionKey:
    """Whose connection to which provider, asked by which Agent."""

    subject: str
    agent: str
    provider: str

    @classmethod
    def of(cls, owner: Owner, provider: str) -> ConnectionKey:
        return cls(owner.subject, owner.agent, provider)

    @property
    def about(self) -> str:
        """What a sealed token is bound to (the sealer's `about`): copied to another key, it does not open."""
        return f"{subject_key(self.subject)}/{self.agent}/{self.provider}"


@dataclass
class StoredConnection:
    key: ConnectionKey
    scopes: list[str]
    sealed_tokens: str = field(repr=False)  # JSON of the provider's token response, sealed (CONNECTION_PURPOSE)
    version: int = 0  # every write that replaces the tokens expects the version it read (a refresh race)
    connected_at: int = 0
    used_at: int = 0


@dataclass(frozen=True)
class ConnectionStart:
    """One consent in flight: what the provider's redirect (its `state`) completes, once."""

    state_digest: str
    owner: Owner
    task_id: str
    interaction_id: str
    provider: str
    scopes: tuple[str, ...]
    sealed_verifier: str = field(repr=False)  # the PKCE code verifier, sealed
    browser_digest: str  # the digest of the cookie the person's browser carries back
    expires_at: int


def digest(value: str) -> str:
    """A one-way digest of a bearer value (a state, a browser cookie) for keys and comparisons."""
    return hashlib.sha256(value.encode()).hexdigest()


def covers(granted: list[str], wanted: list[str] | tuple[str, ...]) -> bool:
    return set(wanted) <= set(granted)
