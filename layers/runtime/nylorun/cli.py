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
        LocalOptions(
            host=args.host,
            port=args.port,
            auth=args.auth,
            dev_tokens=tokens,
            push_secret=args.push_secret,
            push=not args.no_push,
            a2a_wait_ms=args.wait_ms,
        )
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
    if local.options.push_secret:
        print(f"  push secret (verify deliveries with it): {local.options.push_secret}")
    else:
        print("  push: off (the cards say pushNotifications: false; push methods answer -32003)")
    print(f"  blocking SendMessage waits up to {runtime.settings.a2a_wait_ms} ms")
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


def _wait_ms(value: str) -> int:
    # The Runtime's own bounds for a2aWaitMs (settings): 0 to 15 minutes.
    if not value.isdigit() or int(value) > 900_000:
        raise argparse.ArgumentTypeError("a whole number of milliseconds from 0 to 900000")
    return int(value)


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
    serve.add_argument("--no-push", action="store_true", help="serve without push notifications (no push secret)")
    serve.add_argument(
        "--wait-ms",
        type=_wait_ms,
        default=None,
        metavar="N",
        help="how long a blocking SendMessage waits before answering (a2aWaitMs; default 300000)",
    )
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
