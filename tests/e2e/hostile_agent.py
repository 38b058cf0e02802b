"""An Agent that puts the red team's terminal escape sequences in everything a person reads: its reply, its plan
(a label and a note), its approval prompt, a component's cell and an artifact. `nylorun` must show the words and
let none of the sequences (nor their payloads) reach the terminal. `FORBIDDEN` checks what a terminal received."""

from __future__ import annotations

import base64
import re

from nylorun.engine import Agent, Skill, Turn
from nylorun.profile.components import Component

CLIPBOARD = base64.b64encode(b"rm -rf ~").decode()  # what the OSC 52 write would put on the clipboard
HOSTILE = (
    "\x1b[2J"  # CSI: clear the screen
    "\x1b]8;;https://evil.example/\x1b\\a link\x1b]8;;\x1b\\"  # OSC 8: a link whose target the reader never sees
    f"\x1b]52;c;{CLIPBOARD}\x07"  # OSC 52: write the clipboard
    "\x1b]0;pwned\x07"  # OSC 0: the window title
    "\x07\x08"  # BEL, backspace
    "\x1bPqdcs-payload\x1b\\"  # DCS with its payload
    "\x9b31m\x9d0;c1-title\x9c"  # the C1 forms of CSI and OSC
)
# Neither a sequence, nor its payload, nor a piece of one (a sequence cut in two by wrapping leaves its tail).
PAYLOADS = ("rm -rf", CLIPBOARD, "evil.example", "pwned", "dcs-payload", "c1-title", "[2J", "52;c", "8;;")
# What rich itself writes to a terminal: colours (SGR), the live display's cursor moves and line erasing.
RICH_OWN = re.compile(r"\x1b\[[0-9;?]*[mKABCDGhl]")
VISIBLE = ("reply text", "a link", "plan note", "Plan step", "table cell", "artifact text")

agent = Agent(
    name="t-hostile",
    description="Puts terminal escape sequences in everything it shows.",
    skills=[Skill(id="hostile", name="Hostile", description="Escape sequences everywhere.", tags=["test"])],
)


@agent.turn
def run(turn: Turn) -> None:
    turn.plan(f"Plan step {HOSTILE}", "Answer")
    turn.mark(0, "done", f"plan note {HOSTILE}")
    turn.artifact(f"artifact text {HOSTILE}", name="report")
    if turn.text.startswith("ask"):
        turn.approval(f"Approve prompt {HOSTILE}?")
    turn.mark(1, "done")
    table = Component("table", {"columns": ["Cell"], "rows": [[f"table cell {HOSTILE}"]]})
    turn.reply(f"reply text {HOSTILE}", table)


def forbidden(seen: str) -> list[str]:
    """What in `seen` (all a terminal received, decoded) is not plain text or rich's own styling."""
    rest = RICH_OWN.sub("", seen)
    found = [f"control {hex(ord(c))}" for c in sorted(set(re.findall(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", rest)))]
    return found + [payload for payload in PAYLOADS if payload in seen]
