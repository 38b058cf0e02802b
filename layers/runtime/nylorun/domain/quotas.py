"""Per-subject quotas (docs/security.md#quotas): how many turns and push configs one caller may hold open.

A turn is *open* from the moment it is created (started at once or queued behind a busy context) until its task
ends (a terminal state): running, queued and waiting for a person all count. A push config counts against its task
always, and against its subject while its task is open (a config of an ended task sends nothing and expires).
Both stores keep these counts on the items they already write in the same transaction (DynamoDB: the context item
and one quota item per subject), so a count is right however many callers race; over a quota nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nylorun.domain.errors import StoreError

QuotaName = Literal["turnsPerContext", "turnsPerSubject", "pushConfigsPerTask", "pushConfigsPerSubject"]


@dataclass(frozen=True)
class Quotas:
    """The limits; the defaults are docs/security.md#quotas's (settings NYLORUN_MAX_…, template parameters)."""

    turns_per_context: int = 10  # one running or waiting, up to 9 queued behind it
    turns_per_subject: int = 100
    push_configs_per_task: int = 10
    push_configs_per_subject: int = 100

    def limit(self, quota: QuotaName) -> int:
        return {
            "turnsPerContext": self.turns_per_context,
            "turnsPerSubject": self.turns_per_subject,
            "pushConfigsPerTask": self.push_configs_per_task,
            "pushConfigsPerSubject": self.push_configs_per_subject,
        }[quota]


class QuotaExceeded(StoreError):
    """A write would pass a quota: nothing was written. `quota` names it (its wire name), `limit` is its value."""

    def __init__(self, quota: QuotaName, limit: int) -> None:
        super().__init__(f"quota {quota} reached: at most {limit}")
        self.quota: QuotaName = quota
        self.limit = limit
