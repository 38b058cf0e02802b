"""Secrets at rest with AWS KMS (the `Sealer` port): push credentials and callback tokens are stored encrypted
under the stack's key, so neither the table nor its change stream (NEW_AND_OLD_IMAGES: every attribute) holds them
in the clear. KMS encrypts up to 4,096 bytes directly (https://docs.aws.amazon.com/kms/latest/APIReference/API_Encrypt.html);
a credential or a task token (at most 1,024 characters) is far below, so no data key is needed.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from nylorun.ports import StoreUnavailable

if TYPE_CHECKING:
    from nylorun.ports import Sealer

PREFIX = "nylorun-kms:v1:"


def _context(purpose: str, about: str) -> dict[str, str]:
    # The encryption context: IAM conditions on kms:EncryptionContext:nylorun:purpose decide who may seal and who
    # may open each kind; the task binds a ciphertext to its item (copied elsewhere, it does not open).
    return {"nylorun:purpose": purpose, "nylorun:task": about}


class KmsSealer:
    def __init__(self, client: Any, key_id: str) -> None:
        self._kms = client
        self._key = key_id

    def seal(self, plaintext: str, purpose: str, about: str) -> str:
        try:
            out = self._kms.encrypt(KeyId=self._key, Plaintext=plaintext.encode(), EncryptionContext=_context(purpose, about))
        except Exception as exc:
            raise StoreUnavailable(f"kms encrypt: {type(exc).__name__}") from exc
        return PREFIX + base64.b64encode(out["CiphertextBlob"]).decode()

    def open(self, stored: str, purpose: str, about: str) -> str:
        if not stored.startswith(PREFIX):
            return stored
        blob = base64.b64decode(stored.removeprefix(PREFIX))
        try:
            out = self._kms.decrypt(CiphertextBlob=blob, EncryptionContext=_context(purpose, about))
        except Exception as exc:
            raise StoreUnavailable(f"kms decrypt: {type(exc).__name__}") from exc
        return bytes(out["Plaintext"]).decode()


class PlainSealer:
    """No key configured (a Runtime without KMS, the in-memory store): values are stored as they are."""

    def seal(self, plaintext: str, purpose: str, about: str) -> str:
        return plaintext

    def open(self, stored: str, purpose: str, about: str) -> str:
        return stored


if TYPE_CHECKING:  # mypy fails here when the port changes and these adapters do not follow
    _kms: Sealer = KmsSealer(None, "")
    _plain: Sealer = PlainSealer()
