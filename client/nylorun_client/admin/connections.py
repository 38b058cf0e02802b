"""`nylorun admin connections`: how many connected accounts each Agent and provider has
(docs/writing/connections.md).

    nylorun admin connections

Counts only: an operator never sees a token, a subject or a scope (the store's count reads the items' keys).
"""

from __future__ import annotations

import argparse
from typing import Any

from nylorun.adapters.dynamodb.connections import DynamoConnectionStore

from nylorun_client.admin.target import EXIT_OK, Target, run_admin


def add_commands(sub: Any) -> None:
    """Add this module's command to `nylorun admin`'s subparsers."""
    command = sub.add_parser("connections", help="count the connected accounts per Agent and provider (never a token)")
    command.set_defaults(run=lambda args: run_admin(args, count))


def count(target: Target, args: argparse.Namespace) -> int:
    runtime = target.runtime
    # The stack's table, whether or not this shell declares the providers (`runtime.connections` needs them).
    counts = DynamoConnectionStore(runtime.client("dynamodb"), runtime.settings.table_name).count_connections()
    found = sorted(counts.items())
    rows = [{"agent": agent, "provider": provider, "connections": n} for (agent, provider), n in found]

    def text() -> str:
        if not found:
            return f"No connected accounts on {target.where}."
        names = [(f"{agent}/{provider}", n) for (agent, provider), n in found]
        width = max(len("AGENT/PROVIDER"), *(len(name) for name, _ in names))
        return "\n".join([f"{'AGENT/PROVIDER':<{width}}  CONNECTIONS", *(f"{name:<{width}}  {n}" for name, n in names)])

    target.out({"connections": rows}, text)
    return EXIT_OK
