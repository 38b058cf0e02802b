"""An Agent for `nylorun serve` tests, loaded through NYLORUN_AGENTS: its turn raises (a bug in an Agent's code)."""

from __future__ import annotations

from nylorun.engine import Agent, Skill, Turn

agent = Agent(
    name="ledger",
    description="Fails: its ledger is closed.",
    skills=[Skill(id="post", name="Post", description="Posts to the ledger.", tags=["test"])],
)


def post(amount: str) -> None:
    raise ValueError(f"the ledger is closed; cannot post {amount}")


@agent.turn
def run(turn: Turn) -> None:
    turn.say("Posting")
    post(turn.text)
