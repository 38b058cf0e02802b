"""Who is calling: the subject the caller authenticated as, the Agent it called, and its extensions."""

from __future__ import annotations

from dataclasses import dataclass

from nylorun.ports import Owner


@dataclass(frozen=True)
class Caller:
    """Who is calling which Agent, with which profile extensions activated."""

    subject: str
    agent: str
    extensions: tuple[str, ...] = ()

    @property
    def owner(self) -> Owner:
        return Owner(subject=self.subject, agent=self.agent)
