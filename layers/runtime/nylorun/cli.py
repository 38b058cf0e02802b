"""The `nylorun` command. `nylorun serve` starts the local Runtime; `send`, `tasks`, `get`, `cancel`,
`approve`, `answer` and `webhooks` call an Agent (nylorun.client.cli, with the `client` extra)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _serve(args: argparse.Namespace) -> int:
    from nylorun.local.runtime import LocalOptions, LocalRuntime

    tokens = dict(pair.split("=", 1) for pair in args.token) if args.token else {}
    local = LocalRuntime(
        LocalOptions(host=args.host, port=args.port, auth=args.auth, dev_tokens=tokens, push_secret=args.push_secret)
    )
    runtime = local.prepare()
    print("Nylorun Runtime (local: moto stands in for AWS, nothing leaves this machine)")
    for name in runtime.registry.names():
        print(f"  {name:<8} {local.agent_url(name)}/.well-known/agent-card.json")
    if args.auth == "dev":
        for token, subject in local.options.dev_tokens.items():
            print(f"  bearer token for subject {subject!r}: {token}")
    else:
        print("  auth: none (every caller is the subject 'anonymous')")
    print(f"  push secret (verify deliveries with it): {local.options.push_secret}")
    print("Try:")
    first = next(iter(local.options.dev_tokens), "")
    auth_header = f" -H 'Authorization: Bearer {first}'" if args.auth == "dev" else ""
    print(
        f"  curl -s {local.agent_url('echo')} -H 'A2A-Version: 1.0' -H 'Content-Type: application/json'{auth_header} \\\n"
        """    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":"""
        """{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'"""
    )
    sys.stdout.flush()
    try:
        local.serve_forever()
    finally:
        local.stop()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nylorun", description="Nylorun Runtime for AWS")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="start the local Runtime (moto for AWS, all in-process)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--auth", choices=["dev", "none"], default="dev")
    serve.add_argument(
        "--token", action="append", metavar="TOKEN=SUBJECT", help="a dev bearer token and its subject (repeatable)"
    )
    serve.add_argument("--push-secret", default=None, help="whsec_… (default: $NYLORUN_PUSH_SECRET, else generated)")
    serve.set_defaults(run=_serve)
    try:
        from nylorun.client.cli import add_commands
    except ImportError:  # without the `client` extra (a2a-sdk, rich) only `serve` is offered
        return parser
    add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
