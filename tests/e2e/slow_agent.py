"""An Agent for `nylorun serve` tests, loaded through NYLORUN_AGENTS: its turn takes a few seconds."""

from __future__ import annotations

import time

from nylorun.engine import Agent, Skill, Turn

agent = Agent(
    name="slow",
    description="Replies after three seconds.",
    skills=[Skill(id="slow", name="Slow reply", description="Replies after three seconds.", tags=["test"])],
)


@agent.turn
def run(turn: Turn) -> None:
    time.sleep(3)
    turn.reply("late")
