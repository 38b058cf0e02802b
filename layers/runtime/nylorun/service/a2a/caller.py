"""Who is calling: the subject the caller authenticated as, the Agent it called, and its extensions."""

from __future__ import annotations

from dataclasses import dataclass

from nylorun.domain.behalf import acting_subject
from nylorun.ports import Owner


@dataclass(frozen=True)
class Caller:
    """Who is calling which Agent, with which profile extensions activated. `on_behalf`: the original caller's
    scope when a delegating identity calls for one of its callers (nylorun.domain.behalf): the tasks, quotas and
    lists are then that caller's own, within the subject."""

    subject: str
    agent: str
    extensions: tuple[str, ...] = ()
    on_behalf: str | None = None

    @property
    def owner(self) -> Owner:
        return Owner(subject=acting_subject(self.subject, self.on_behalf), agent=self.agent)
