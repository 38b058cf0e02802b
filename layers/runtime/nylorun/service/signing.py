"""The keys that sign a subject's push deliveries, for the push function (to sign) and for the subject itself
(`GET /v1/a2a/push-signing-secrets`, to verify). Per subject, so no tenant can forge another's (docs/security.md)."""

from __future__ import annotations

from nylorun.domain.signing import PushSigning, signing_secrets
from nylorun.ports import SigningSecrets


class PushSigningKeys:
    def __init__(self, secrets: SigningSecrets, mode: PushSigning) -> None:
        self._secrets = secrets
        self._mode = mode

    def for_subject(self, subject: str) -> list[str]:
        """The subject's Standard Webhooks secrets, newest first: one per current Runtime secret (two while it
        rotates). Asked for every delivery, so a rotated Runtime secret is used once its cache lets it through."""
        return signing_secrets(self._secrets(), subject, self._mode)
