"""`echo`: replies with the text it got. The smallest useful Agent."""

from nylorun.engine import Agent, Skill, Turn

agent = Agent(
    name="echo",
    description="Replies with the text it received.",
    skills=[Skill(id="echo", name="Echo", description="Repeats your message back.", tags=["demo"], examples=["hello"])],
)


@agent.turn
def run(turn: Turn) -> None:
    turn.reply(turn.text or "(no text)")
