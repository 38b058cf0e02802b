"""The client commands of `nylorun`: send, tasks, get, cancel, approve, answer, webhooks.

People get a live display (rich) and prompts; scripts pass `--json` and get JSON Lines on stdout (one
object per task update) and give their answers as stdin lines. The protocol is in docs/calling/cli.md.
Expected errors are one line on stderr, "ErrorName: message", and a non-zero exit code.

One module per job: `parser` (the arguments), `conversation` (send, approve, answer), `tasks` (tasks, get,
cancel), `receive` (webhooks), `running` (the client, the output, the exit codes), `output` (--json) and
`human` (the live display and prompts), `render` (drawing a task), `notes` (what to do next).
"""

from nylorun_client.cli.human import HumanOutput
from nylorun_client.cli.notes import push_note, waiting_message
from nylorun_client.cli.output import NO, YES, InvalidAnswer, JsonOutput, Output, Reply
from nylorun_client.cli.parser import add_commands
from nylorun_client.cli.render import STATE_STYLES, STEP_ICONS, print_outcome, render_interaction, render_task
from nylorun_client.cli.running import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_WAITING

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_WAITING",
    "NO",
    "STATE_STYLES",
    "STEP_ICONS",
    "YES",
    "HumanOutput",
    "InvalidAnswer",
    "JsonOutput",
    "Output",
    "Reply",
    "add_commands",
    "print_outcome",
    "push_note",
    "render_interaction",
    "render_task",
    "waiting_message",
]
