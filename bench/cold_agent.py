"""The Agent the api function serves in the cold-start figure: echo, alone (NYLORUN_AGENTS names it), so the figure
counts the Runtime's import and first call, not the example Agents' (`nylorun_examples` imports all five)."""

from nylorun.engine import Agent, Skill, Turn

agent = Agent(
    name="echo",
    description="Replies with the text it received.",
    skills=[Skill(id="echo", name="Echo", description="Repeats your message back.", tags=["bench"])],
)


@agent.turn
def run(turn: Turn) -> None:
    turn.reply(turn.text or "(no text)")
