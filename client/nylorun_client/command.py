"""The `nylorun` command. `send`, `tasks`, `get`, `cancel`, `approve`, `answer` and `webhooks` call an Agent
(nylorun_client.cli, the `client` extra); `serve` starts the local Runtime (nylorun_local, the `local` extra,
offered only where it is installed); `admin` is the operator's (nylorun_client.admin);
`console` serves the web console (nylorun_client.console)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from nylorun_client.admin import add_admin_command, with_local_port
from nylorun_client.cli import add_commands
from nylorun_client.console.command import add_console_command


def _serve_missing(args: argparse.Namespace) -> int:
    print(
        "nylorun serve needs the local stack: pip install 'nylorun-runtime-aws[local]' (moto, uvicorn, pyyaml)",
        file=sys.stderr,
    )
    return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nylorun", description="Nylorun Runtime for AWS")
    commands = parser.add_subparsers(dest="command", required=True)
    try:
        from nylorun_local.serve import add_serve_command
    except ImportError:  # without the `local` extra (moto, uvicorn, pyyaml) `serve` only says how to get it
        missing = commands.add_parser("serve", help="start the local Runtime (needs the `local` extra)")
        missing.set_defaults(run=_serve_missing)
    else:
        add_serve_command(commands)
    add_commands(commands)
    add_admin_command(commands)
    add_console_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(with_local_port(sys.argv[1:] if argv is None else argv))
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
