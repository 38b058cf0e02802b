"""Which keys sign a subject's push deliveries (per-subject signing keys: docs/security.md).

One Runtime secret signing every delivery let any receiver (any tenant) forge any other tenant's webhooks. So
each subject's deliveries are signed with a key derived from the Runtime secret and the subject: a receiver
gets only its own key (`GET /v1/a2a/push-signing-secrets`), which verifies its own deliveries and no one
else's, and cannot lead back to the Runtime secret (HMAC-SHA256 is a PRF: RFC 2104, as HKDF-Expand uses it,
RFC 5869 §2.3). While a Runtime secret rotates, every current one derives a key and all of them sign.

`shared` keeps the old behaviour, every delivery signed with the Runtime secret itself: for single-tenant
deployments only, where every receiver may hold it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Literal

PushSigning = Literal["per-subject", "shared"]

SECRET_PREFIX = "whsec_"
# Domain separation: a key derived for push signing is never the same as one the secret derives for anything else.
_LABEL = b"nylorun/push-signing/v1\x00"


def secret_key(secret: str) -> bytes:
    """The key bytes of a Standard Webhooks secret ("whsec_" + base64, or the bare base64 Secrets Manager
    stores), decoded as the `standardwebhooks` package decodes it (padding added), so both agree on the key."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX) + "==")


def subject_secret(runtime_secret: str, subject: str) -> str:
    """The subject's Standard Webhooks secret derived from one Runtime secret: HMAC-SHA256(runtime key,
    label || subject), 32 bytes, as "whsec_" + base64."""
    derived = hmac.new(secret_key(runtime_secret), _LABEL + subject.encode(), hashlib.sha256).digest()
    return SECRET_PREFIX + base64.b64encode(derived).decode()


def signing_secrets(runtime_secrets: Sequence[str], subject: str, mode: PushSigning) -> list[str]:
    """The secrets that sign the subject's deliveries now, in the Runtime secrets' order (newest first while
    rotating): one per Runtime secret, so a receiver holding the key of either verifies during a rotation."""
    if mode == "shared":
        return [s if s.startswith(SECRET_PREFIX) else SECRET_PREFIX + s for s in runtime_secrets]
    return [subject_secret(secret, subject) for secret in runtime_secrets]
