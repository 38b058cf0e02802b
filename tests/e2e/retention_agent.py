"""An Agent for the retention test (`nylorun serve`, loaded through NYLORUN_AGENTS): it reads the caller's files,
writes one output path twice (two versions), and replies; "wait" asks a question instead (its task stays open)."""

from __future__ import annotations

from nylorun.engine import Agent, Skill, Turn

agent = Agent(
    name="keeper",
    description="Reads your files, writes a report twice.",
    skills=[Skill(id="keep", name="Keep", description="Reads files, writes a report.", tags=["test"])],
    input_modes=["text/plain", "application/octet-stream"],
)


@agent.turn
def run(turn: Turn) -> None:
    if turn.text == "wait":
        turn.question("Which report?")
    read = sum(len(f.read()) for f in turn.files)
    turn.write_file("out/report.txt", f"draft of {turn.task_id}", media_type="text/plain")
    turn.write_file("out/report.txt", f"report of {turn.task_id}: read {read} bytes", media_type="text/plain")
    turn.reply("written")
