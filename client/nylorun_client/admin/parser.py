"""`nylorun admin`'s arguments: where to act (--stack or --local) and the commands of `tasks` and `queues`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from nylorun_client.admin import connections, queues, tasks
from nylorun_client.admin.target import DEFAULT_LOCAL_PORT


def add_admin_command(commands: Any) -> None:
    admin = commands.add_parser(
        "admin", help="operate a Runtime: tasks waiting for an operator, dead letters (operators only)"
    )
    _where_options(admin, unset=None)
    sub = admin.add_subparsers(dest="admin_command", required=True, metavar="COMMAND")
    tasks.add_commands(sub)
    queues.add_commands(sub)
    connections.add_commands(sub)
    # After the command too (`nylorun admin dlq --local 18083`), as a person types it; SUPPRESS: a command's
    # parser sets only what follows it, so it never resets what came before it (docs/operate.md).
    for command in sub.choices.values():
        _where_options(command, unset=argparse.SUPPRESS)


def _where_options(parser: argparse.ArgumentParser, *, unset: Any) -> None:
    """--stack or --local, --region and --json on `parser`; `unset` is each one's value when it is not given."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--stack", default=unset, help="a deployed stack's name (AWS credentials and region as boto3 finds them)"
    )
    where.add_argument(
        "--local", type=int, nargs="?", const=DEFAULT_LOCAL_PORT, default=unset, metavar="PORT",
        help=f"a local Runtime (`nylorun serve`) on this port (default {DEFAULT_LOCAL_PORT}); the default target",
    )
    parser.add_argument("--region", default=unset, help="the stack's region (default: boto3's)")
    parser.add_argument("--json", action="store_true", default=False if unset is None else unset,
                        help="JSON on stdout")


def with_local_port(argv: Sequence[str]) -> list[str]:
    """`admin --local COMMAND …` read as `admin --local 8080 COMMAND …`: argparse takes the word after `--local`
    for its optional PORT, and `--local dlq` failed with "invalid int value: 'dlq'"."""
    argv = list(argv)
    if argv[:1] == ["admin"] and "--local" in argv:
        at = argv.index("--local") + 1
        if at == len(argv) or not argv[at].isdigit():
            argv.insert(at, str(DEFAULT_LOCAL_PORT))
    return argv
