"""Secrets in AWS Secrets Manager, read through Powertools Parameters: the push signing secret(s) (SigningSecrets)
and the Runtime's key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.parameters import SecretsProvider


class SecretsManagerSigningSecrets:
    """The current value of one secret: space-separated Standard Webhooks secrets, new first while rotating.

    Powertools Parameters keeps the value for `max_age_seconds` in this instance, then reads it again on the next
    delivery: a warm push function signs with a rotated value at most `max_age_seconds` after it became current
    (a delivery already signed goes out as it is), at the cost of one GetSecretValue per instance per max age.
    0 reads it for every delivery.
    """

    def __init__(self, client: Any, secret_id: str, max_age_seconds: int) -> None:
        self._client = client
        self._provider: SecretsProvider | None = None
        self._secret_id = secret_id
        self._max_age = max_age_seconds

    def __call__(self) -> list[str]:
        # Made on first use: Powertools' provider touches its client when made, and a Secrets Manager client costs
        # the api function's cold start ~50 ms, though only its push-signing-secrets route reads the secret.
        if self._provider is None:
            self._provider = SecretsProvider(boto3_client=self._client)
        return str(self._provider.get(self._secret_id, max_age=self._max_age)).split()

    def forget(self) -> None:
        """Drop the cached value: the next call reads the secret again (after a SnapStart restore)."""
        self._provider = None


def runtime_key(client: Any, secret_id: str) -> str:
    """The Runtime's key (settings.runtime_key): it never changes, so it is read once per instance."""
    return str(SecretsProvider(boto3_client=client).get(secret_id, max_age=366 * 24 * 3600))


def connection_secrets(client: Any, secret_id: str) -> Callable[[str], str | None]:
    """docs/writing/connections.md: the providers' client secrets, one JSON object {"provider": "secret"} in
    one secret, read when a connection first needs one and kept 5 minutes (a rotated secret is used within
    that time)."""
    provider: SecretsProvider | None = None

    def secret_of(name: str) -> str | None:
        nonlocal provider
        provider = provider or SecretsProvider(boto3_client=client)
        value = provider.get(secret_id, max_age=300, transform="json")
        found = value.get(name) if isinstance(value, dict) else None
        return str(found) if found else None

    return secret_of
