"""An Agent whose words are HTML and script a browser would run if a page drew them as markup: in its reply, plan
note, approval prompt and detail, a table cell and an artifact, with terminal escapes beside them. The console
must show every one as inert text (`window.pwned` never set, no <img> or <script> of theirs in the page)."""

from __future__ import annotations

from nylorun.engine import Agent, Skill, Turn
from nylorun.profile.components import Component

SCRIPT = "<script>window.pwned = 'script'</script>"
IMAGE = "<img src=x onerror=\"window.pwned = 'img'\">"
ESCAPES = "\x1b[2J\x1b]0;pwned-title\x07"
HOSTILE = f"{SCRIPT} {IMAGE} {ESCAPES}"

agent = Agent(
    name="t-html",
    description="Puts HTML, script and terminal escapes in everything it shows.",
    skills=[Skill(id="html", name="HTML", description="Markup everywhere.", tags=["test"])],
)


@agent.turn
def run(turn: Turn) -> None:
    turn.plan(f"Plan {HOSTILE}", "Answer")
    turn.mark(0, "done", f"note {HOSTILE}")
    turn.artifact(f"artifact {HOSTILE}", name=f"report {IMAGE}")
    if turn.text.startswith("ask"):
        turn.approval(f"Approve {HOSTILE}?", detail={"why": HOSTILE})
    turn.mark(1, "done")
    table = Component("table", {"columns": ["Cell"], "rows": [[f"cell {HOSTILE}"]]})
    turn.reply(f"reply {HOSTILE}", table)
