"""Who a delegate's caller acts for: the subject it authenticated as, kept apart per original caller.

Profile v2: the caller acts for the subject it authenticated as. A delegating Agent (`turn.delegate`) calls every
delegate as one subject, its own; to keep its callers apart there, it names each original caller with an opaque
scope in the `Nylorun-On-Behalf-Of` header: a keyed digest of that caller's subject (the delegating Runtime's
key), so the delegate never learns who the caller is. A delegate honours the header only from the subjects its
operator lists as delegating identities (NYLORUN_DELEGATING_SUBJECTS); from anyone else it is ignored, so a
caller can never take another's place. Honoured, the task's owner is the delegating subject *within* that scope:
its quotas, ListTasks, task ids and everything kept per owner are that original caller's alone.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from nylorun.domain.ids import RUNTIME_KEY

ON_BEHALF_HEADER = "Nylorun-On-Behalf-Of"
# What a scope looks like on the wire: a digest, never a subject (subjects are personal data).
SCOPE = re.compile(r"[0-9a-f]{32}")
# Between the delegating subject and the scope in an owner's subject. A newline: the Authenticator refuses a
# subject that holds one, so no subject a caller authenticates as can be mistaken for a scoped one.
MARK = "\non-behalf-of "


class BadScope(ValueError):
    """A delegating identity sent a header that is not a scope."""


def caller_scope(subject: str) -> str:
    """The scope a delegating Runtime names its caller `subject` with (keyed: the delegate cannot reverse it)."""
    return RUNTIME_KEY.digest("on-behalf-of", subject)[:32]


def acting_subject(subject: str, scope: str | None) -> str:
    """The owner's subject: the authenticated subject, within the original caller's scope when there is one."""
    return f"{subject}{MARK}{scope}" if scope else subject


def authenticated_subject(owner_subject: str) -> str:
    """The subject the caller authenticated as (Profile v2), without the scope."""
    return owner_subject.split(MARK, 1)[0]


def honoured_scope(subject: str, header: str | None, delegators: Collection[str]) -> str | None:
    """The scope a request acts in: the header's, only from a delegating identity; else None. `BadScope` when a
    delegating identity sends one that is not a scope (nothing is read or written then)."""
    if header is None or subject not in delegators:
        return None
    value = header.strip()
    if not SCOPE.fullmatch(value):
        raise BadScope(f"{ON_BEHALF_HEADER} must be 32 lowercase hex digits")
    return value
