"""The OAuth 2.0 client a connection speaks through (the `OAuthClient` port), all of it Authlib's: the authorization
URL with PKCE S256 (RFC 7636), the code exchange, the refresh and the revocation (RFC 7009).

Authlib (and httpx under it) is imported inside each call, never at import: the api function's cold start serves
cards and JSON-RPC without it (tests/static/test_api_cold_imports.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nylorun.ports.connections import OAuthFailed, Tokens

if TYPE_CHECKING:
    from nylorun.domain.connections import Provider
    from nylorun.ports.connections import OAuthClient

SecretOf = Callable[[str], "str | None"]  # a provider's client secret, by its name


class AuthlibOAuth:
    def __init__(self, secret_of: SecretOf, timeout_seconds: float = 10) -> None:
        self._secret_of = secret_of
        self._timeout = timeout_seconds

    def _session(self, provider: Provider, **options: Any) -> Any:
        from authlib.integrations.httpx_client import OAuth2Client

        secret = provider.client_secret or self._secret_of(provider.name)
        return OAuth2Client(
            client_id=provider.client_id, client_secret=secret, timeout=self._timeout, **options
        )

    def authorization_url(
        self, provider: Provider, redirect_uri: str, scopes: list[str], state: str, code_verifier: str
    ) -> str:
        with self._session(provider, redirect_uri=redirect_uri, scope=" ".join(scopes),
                           code_challenge_method="S256") as session:
            url, _ = session.create_authorization_url(provider.authorize_url, state=state, code_verifier=code_verifier)
        return str(url)

    def exchange(self, provider: Provider, redirect_uri: str, code: str, code_verifier: str) -> Tokens:
        with self._session(provider, redirect_uri=redirect_uri) as session:
            return _tokens(lambda: session.fetch_token(provider.token_url, code=code, code_verifier=code_verifier))

    def refresh(self, provider: Provider, refresh_token: str) -> Tokens:
        with self._session(provider) as session:
            return _tokens(lambda: session.refresh_token(provider.token_url, refresh_token=refresh_token))

    def revoke(self, provider: Provider, token: str) -> None:
        if not provider.revoke_url:
            return
        with self._session(provider) as session:
            _tokens(lambda: session.revoke_token(provider.revoke_url, token=token, token_type_hint="refresh_token"))


def _tokens(call: Callable[[], Any]) -> Tokens:
    """The provider's answer as a plain dict with `expires_at`; its refusal as OAuthFailed naming only the OAuth
    error code (an exception's text could quote a request, and a request carries the code or a token)."""
    import httpx
    from authlib.integrations.base_client.errors import OAuthError

    try:
        answer = call()
    except OAuthError as refused:
        raise OAuthFailed(str(refused.error or "refused")[:100]) from None
    except httpx.HTTPError as failed:
        raise OAuthFailed(f"the provider could not be reached ({type(failed).__name__})") from None
    if answer is None or not hasattr(answer, "items"):  # revocation: an httpx response
        status = getattr(answer, "status_code", 200)
        if status >= 400:
            raise OAuthFailed(f"the provider answered HTTP {status}")
        return {}
    tokens = dict(answer.items())
    if "expires_at" not in tokens and "expires_in" in tokens:
        tokens["expires_at"] = int(time.time()) + int(tokens["expires_in"])
    return tokens


if TYPE_CHECKING:  # mypy fails here when the port changes and this adapter does not follow
    _oauth: OAuthClient = AuthlibOAuth(lambda name: None)
