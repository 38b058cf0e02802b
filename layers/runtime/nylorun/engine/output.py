"""What an agent left on its turn for the runner to read after the agent returns (`TurnOutput`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nylorun.profile.extensions import PlanStep
from nylorun.protocol.models import Message, Part


@dataclass
class TurnOutput:
    """What the agent left on its turn, for the runner: the plan, the reply and whether it rejected."""

    plan: list[PlanStep] = field(default_factory=list)
    note: str | None = None  # the latest step text (`turn.say`)
    reply: Message | None = None
    rejected: bool = False
    # `turn.show`: the components in view on the turn's status messages, by kind and title (a later `show` of
    # the same kind and title replaces one, so a timeline can move on).
    shown: dict[tuple[str, str | None], list[Part]] = field(default_factory=dict)

    @property
    def view(self) -> list[Part]:
        return [part for parts in self.shown.values() for part in parts]
