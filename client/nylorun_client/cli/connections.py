"""`nylorun connections list|revoke`: the caller's own connected accounts (docs/writing/connections.md), never
a token."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx

from nylorun_client import safe

EXIT_OK, EXIT_ERROR = 0, 1


def add_connections(commands: Any, common: argparse.ArgumentParser) -> None:
    cmd = commands.add_parser(
        "connections", help="list or revoke your connected accounts (see docs/writing/connections.md)"
    )
    actions = cmd.add_subparsers(dest="action", required=True)
    runtime = {"help": "the Runtime's URL, or any Agent URL on it, e.g. http://127.0.0.1:8080"}
    listing = actions.add_parser("list", parents=[common], help="your connections: Agent, provider, scopes, dates")
    listing.add_argument("url", **runtime)
    revoke = actions.add_parser("revoke", parents=[common], help="delete one and revoke it at its provider")
    revoke.add_argument("url", **runtime)
    revoke.add_argument("agent", help="the Agent that asked for it, e.g. support")
    revoke.add_argument("provider", help="the provider, e.g. payments")
    cmd.set_defaults(run=connections)


def connections(args: argparse.Namespace) -> int:
    base = args.url.split("/v1/", 1)[0].rstrip("/") + "/v1/a2a/connections"
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    try:
        if args.action == "revoke":
            answer = httpx.delete(f"{base}/{args.agent}/{args.provider}", headers=headers, timeout=30)
        else:
            answer = httpx.get(base, headers=headers, timeout=30)
    except httpx.HTTPError as failed:
        print(safe.clean(f"Could not reach {base}: {type(failed).__name__}"), file=sys.stderr)
        return EXIT_ERROR
    if answer.status_code >= 400:
        print(safe.clean(f"HTTP {answer.status_code}: {answer.text[:300]}"), file=sys.stderr)
        return EXIT_ERROR
    if args.action == "revoke":
        print(safe.clean(f"Revoked {args.provider} for {args.agent}: the next turn that needs it asks again."))
        return EXIT_OK
    found: list[dict[str, Any]] = answer.json().get("connections", [])
    for connection in found:
        if args.json:
            print(safe.dumps(connection))
        else:
            scopes = " ".join(connection.get("scopes", []))
            print(safe.clean(f"{connection['agent']}  {connection['provider']}  [{scopes}]  connected "
                             f"{connection['connectedAt']}, last used {connection['lastUsedAt']}"))
    if not found and not args.json:
        print("No connections.")
    return EXIT_OK
