"""The A2A errors a refused write becomes: a quota reached, or a task's size budget passed."""

from __future__ import annotations

from nylorun.ports import QuotaExceeded, TooLarge
from nylorun.protocol.errors import InvalidParamsError, UnsupportedOperationError, quota_exceeded


def over_budget(large: TooLarge) -> InvalidParamsError:
    """A caller's message the task has no room for: refused, nothing written (docs/limits.md)."""
    return InvalidParamsError(
        f"message would pass the task's size budget: {large}. Start a new task in this context, or send large "
        "content as a url part",
        field_violations=[("message", f"Over the task's size budget: {large}.")],
    )


# What each quota counts, as its error says it (docs/security.md#quotas).
_QUOTA_UNITS = {
    "turnsPerContext": "open turns (running, waiting for a person, or queued) in one context; wait for one to end "
    "or cancel one",
    "turnsPerSubject": "open turns (running, waiting for a person, or queued) for one caller; wait for one to end "
    "or cancel one",
    "pushConfigsPerTask": "push notification configs on one task; delete one first",
    "pushConfigsPerSubject": "push notification configs on one caller's open tasks; delete one first",
}


def over_quota(over: QuotaExceeded) -> UnsupportedOperationError:
    return quota_exceeded(over.quota, over.limit, _QUOTA_UNITS[over.quota])
