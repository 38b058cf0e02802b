"""The client commands' arguments: each command's subparser, and the command it runs."""

from __future__ import annotations

import argparse
import os
from typing import Any

from a2a.types import TaskState

from nylorun_client.cli.connections import add_connections
from nylorun_client.cli.conversation import answer, approve, send
from nylorun_client.cli.receive import receive
from nylorun_client.cli.tasks import cancel, get, list_tasks


def add_commands(commands: Any) -> None:
    """Add the client commands to `nylorun`'s subparsers (`serve` comes from nylorun_local.serve)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--token", default=os.environ.get("NYLORUN_TOKEN"), help="bearer token (default: $NYLORUN_TOKEN)"
    )
    common.add_argument("--json", action="store_true", help="JSON Lines on stdout; answers from stdin lines")
    common.add_argument(
        "--core",
        action="store_true",
        help="activate no profile extension (the core tier, as a plain A2A client)",
    )
    url = {"help": "the Agent's URL, e.g. http://127.0.0.1:8080/v1/a2a/agents/support"}

    send_cmd = commands.add_parser("send", parents=[common], help="send a message and follow the task live")
    send_cmd.add_argument("url", **url)
    send_cmd.add_argument("text")
    send_cmd.add_argument("--context", help="continue this context (contextId)")
    send_cmd.add_argument("--task", help="send into this task (a follow-up or a text reply)")
    send_cmd.add_argument("--no-wait", action="store_true", help="print the task as created and return")
    send_cmd.add_argument(
        "--push", metavar="URL", help="register this webhook for the task's push deliveries (see `nylorun webhooks`)"
    )
    send_cmd.set_defaults(run=send)

    tasks = commands.add_parser("tasks", parents=[common], help="list your tasks, latest status change first")
    tasks.add_argument("url", **url)
    tasks.add_argument("--context", help="only this contextId")
    tasks.add_argument("--state", type=_state_name, help="only this state, e.g. completed or input-required")
    tasks.set_defaults(run=list_tasks)

    for name, helptext, run in (("get", "show a task", get), ("cancel", "cancel a task", cancel)):
        sub = commands.add_parser(name, parents=[common], help=helptext)
        sub.add_argument("url", **url)
        sub.add_argument("task")
        sub.set_defaults(run=run)

    approve_cmd = commands.add_parser(
        "approve", parents=[common], help="approve the open approval (or decline the open connection with --deny)"
    )
    approve_cmd.add_argument("url", **url)
    approve_cmd.add_argument("task")
    approve_cmd.add_argument("--deny", action="store_true", help="deny the approval (or decline the connection)")
    approve_cmd.add_argument("--no-wait", action="store_true", help="do not follow the task after answering")
    approve_cmd.set_defaults(run=approve)

    answer_cmd = commands.add_parser("answer", parents=[common], help="answer the open question")
    answer_cmd.add_argument("url", **url)
    answer_cmd.add_argument("task")
    answer_cmd.add_argument("value")
    answer_cmd.add_argument("--no-wait", action="store_true", help="do not follow the task after answering")
    answer_cmd.set_defaults(run=answer)

    add_connections(commands, common)

    hooks = commands.add_parser("webhooks", help="receive and verify push deliveries (Standard Webhooks)")
    hooks.add_argument("--port", type=int, default=8090, help="0 picks a free port (default 8090)")
    hooks.add_argument("--host", default="127.0.0.1")
    hooks.add_argument(
        "--from",
        dest="agent_url",
        metavar="AGENT_URL",
        help="fetch your own signing keys from this Agent's Runtime (with --token / $NYLORUN_TOKEN)",
    )
    hooks.add_argument(
        "--token", default=os.environ.get("NYLORUN_TOKEN"), help="bearer token for --from (default: $NYLORUN_TOKEN)"
    )
    hooks.add_argument("--secret-file", help="a file holding the whsec_… secret(s), whitespace-separated")
    # No secret in an argument (docs/calling/cli.md): a secret on the command line is readable by every process
    # (ps, /proc) and kept in shell history.
    hooks.add_argument("--secret", action=_RefuseSecretArgument, help=argparse.SUPPRESS)
    hooks.add_argument("--json", action="store_true", help="one JSON object per delivery on stdout")
    hooks.set_defaults(run=receive)


class _RefuseSecretArgument(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.error(
            "--secret is refused: a secret on the command line is visible to other processes and kept in shell "
            "history. Use --from AGENT_URL (your own keys), --secret-file PATH or $NYLORUN_PUSH_SECRET"
        )


def _state_name(value: str) -> str:
    name = value.strip().upper().replace("-", "_").replace(" ", "_")
    name = name if name.startswith("TASK_STATE_") else f"TASK_STATE_{name}"
    known = [state for state in TaskState.keys() if state != "TASK_STATE_UNSPECIFIED"]  # noqa: SIM118 (protobuf enum)
    if name not in known:
        raise argparse.ArgumentTypeError(f"unknown state {value!r}; one of {', '.join(known)}")
    return name
