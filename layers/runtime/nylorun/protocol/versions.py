"""Which `A2A-Version` a request may name: only 1.0; any other gets -32009 saying which versions are served."""

from __future__ import annotations

import re

from nylorun.protocol.errors import VersionNotSupportedError

SUPPORTED_VERSIONS = ("1.0",)
VERSION_HEADER = "A2A-Version"
# A2A §3.6.2: a missing or empty A2A-Version is read as 0.3.
DEFAULT_VERSION = "0.3"
# A2A §14.2.1: the header is Major.Minor; §3.6: a patch number is never negotiated, so `1.0.2` is 1.0. Any other
# 1.x is another version (the card declares 1.0 only) and `1` names none.
_SERVED = re.compile(r"1\.0(?:\.[0-9]+)?")


def check_version(header: str | None, query: str | None) -> None:
    """The version from the header, else the `?A2A-Version=` query parameter; VersionNotSupportedError unless 1.0.

    Decision: a missing version is 0.3 (A2A §3.6.2), so it is refused like any other; strict keeps the MUST and
    the message tells a bare curl user exactly what to add. The a2a-sdk, @a2a-js/sdk and the TCK send `1.0`.
    """
    value = (header or query or "").strip()
    if _SERVED.fullmatch(value):
        return
    served = ", ".join(SUPPORTED_VERSIONS)
    requested = value[:16] or DEFAULT_VERSION
    # ErrorInfo metadata is what an SDK caller sees of `data` (the a2a-sdk client keeps only it): name the versions.
    metadata = {"supportedVersions": served, "requestedVersion": requested}
    if not value:
        message = (
            f"A2A version '{DEFAULT_VERSION}' is not supported (no {VERSION_HEADER} header was sent). "
            f"This Runtime speaks A2A {served}: send the header '{VERSION_HEADER}: {SUPPORTED_VERSIONS[0]}'."
        )
    else:
        message = f"A2A version '{requested}' is not supported. Expected '{served}'."
    raise VersionNotSupportedError(message, metadata=metadata)
