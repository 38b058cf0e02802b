"""`nylorun admin`'s arguments: where to act (--stack or --local) and the commands of `tasks` and `queues`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nylorun_client.admin import connections, queues, tasks
from nylorun_client.admin.target import DEFAULT_LOCAL_PORT


def add_admin_command(commands: Any) -> None:
    admin = commands.add_parser(
        "admin", help="operate a Runtime: tasks waiting for an operator, dead letters (operators only)"
    )
    where = admin.add_mutually_exclusive_group()
    where.add_argument("--stack", help="a deployed stack's name (AWS credentials and region as boto3 finds them)")
    where.add_argument(
        "--local", type=int, nargs="?", const=DEFAULT_LOCAL_PORT, metavar="PORT",
        help=f"a local Runtime (`nylorun serve`) on this port (default {DEFAULT_LOCAL_PORT}); the default target",
    )
    admin.add_argument("--region", help="the stack's region (default: boto3's)")
    admin.add_argument("--json", action="store_true", help="JSON on stdout")
    sub = admin.add_subparsers(dest="admin_command", required=True, metavar="COMMAND")
    tasks.add_commands(sub)
    queues.add_commands(sub)
    connections.add_commands(sub)


def with_local_port(argv: Sequence[str]) -> list[str]:
    """`admin --local COMMAND …` read as `admin --local 8080 COMMAND …`: argparse takes the word after `--local`
    for its optional PORT, and `--local dlq` failed with "invalid int value: 'dlq'"."""
    argv = list(argv)
    if argv[:1] == ["admin"] and "--local" in argv:
        at = argv.index("--local") + 1
        if at == len(argv) or not argv[at].isdigit():
            argv.insert(at, str(DEFAULT_LOCAL_PORT))
    return argv
