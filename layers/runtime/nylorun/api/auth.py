"""Who is calling (Profile v2: the subject the caller authenticated as).

* jwt  (deployed): API Gateway's JWT authorizer has verified the token; the subject is its `sub` claim,
       read from the Lambda event Mangum hands the app.
* dev  (local, sam local): `Authorization: Bearer <token>` where the token is one of the configured dev tokens.
* none (local, conformance kits): every caller is the one subject `anonymous`.
On Lambda outside sam local, only jwt starts (settings: fail closed).
"""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import Request

from nylorun.settings import Settings

ANONYMOUS = "anonymous"


class Unauthenticated(Exception):
    pass


class Authenticator:
    def __init__(self, settings: Settings) -> None:
        self._mode = settings.auth
        self._tokens = dict(settings.dev_tokens)

    def subject(self, request: Request) -> str:
        if self._mode == "none":
            return ANONYMOUS
        if self._mode == "jwt":
            subject = self._jwt_subject(request.scope.get("aws.event") or {})
        else:
            subject = self._dev_subject(request.headers.get("authorization", ""))
        if "\n" in subject:
            # nylorun.domain.behalf: a newline marks a subject acting on behalf of a delegator's caller; no
            # authenticated subject may look like one.
            raise Unauthenticated("A subject with a line break is not accepted")
        return subject

    @staticmethod
    def _jwt_subject(event: dict[str, Any]) -> str:
        claims = ((event.get("requestContext") or {}).get("authorizer") or {}).get("jwt", {}).get("claims", {})
        subject = claims.get("sub")
        if not subject:
            raise Unauthenticated("A verified bearer token with a `sub` claim is required")
        return str(subject)

    def _dev_subject(self, header: str) -> str:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("Send 'Authorization: Bearer <token>' (nylorun serve prints a dev token)")
        for known, subject in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.strip().encode()):
                return subject
        raise Unauthenticated("Unknown bearer token")
