"""An Agent for `nylorun serve` tests and docs/operate.md's operator walk-through (Try it locally), loaded
through NYLORUN_AGENTS: its payment dies mid-way the first time it runs for a task (the process "dies" after
the charge went out and before its result was journaled), so the turn's outcome is lost and the task waits for
an operator (docs/operate.md#lost-outcomes)."""

from __future__ import annotations

from typing import Any

from nylorun.engine import Agent, Skill, Turn

agent = Agent(
    name="billing",
    description="Charges a card; its first charge of each task dies before its result is recorded.",
    skills=[Skill(id="charge", name="Charge", description="Charges a card.", tags=["test"])],
)
charges: dict[str, list[str]] = {}  # task id -> the idempotency key of every charge that went out


class ProcessDied(BaseException):
    """The process dies mid-effect (a BaseException: no agent code catches it, as no code survives a kill)."""


@agent.turn
def run(turn: Turn) -> None:
    if turn.text.startswith("next"):
        turn.reply("next turn done")
        return

    def charge(key: str) -> dict[str, Any]:
        sent = charges.setdefault(turn.task_id, [])
        sent.append(key)
        if len(sent) == 1:
            raise ProcessDied()
        return {"charged": "EUR 25", "attempts": len(sent), "key": key}

    turn.plan("Charge the card", "Send the receipt")
    turn.mark(0, "active")
    receipt = turn.effect("charge_card", charge)
    turn.mark(0, "done")
    turn.mark(1, "done")
    turn.reply(f"Charged: {receipt['charged']}")
