"""`nylorun serve`: the local Runtime in the foreground, until SIGINT (^C) or SIGTERM.

Either signal stops it cleanly: uvicorn finishes the requests in flight, then the pollers and moto stop, and
the command exits 0 (a stop that was asked for is not a failure) without a traceback.
"""

from __future__ import annotations

import argparse
import secrets
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from nylorun_client.safe import clean

from nylorun_local.runtime import EXAMPLE_AGENTS, LocalOptions, LocalRuntime


class _Stop(Exception):
    """SIGTERM, raised where the main thread is (as SIGINT raises KeyboardInterrupt)."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signum)


@contextmanager
def _signals_stop() -> Iterator[None]:
    """SIGINT and SIGTERM end the `with` body by an exception; the cleanup after it is not interrupted."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also where it was inherited ignored (a `cmd &`)
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        yield
    finally:
        # uvicorn re-raises the signal it caught once it has shut down; from here on, a second ^C must not cut the
        # cleanup short (the pollers and moto stop within seconds).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _serve(args: argparse.Namespace) -> int:
    # Deployed, AgentsLayer puts agents/ at /opt/python; locally the same folder goes first on the import path.
    if Path(args.agents_dir).is_dir():
        sys.path.insert(0, str(Path(args.agents_dir).resolve()))
    tokens = dict(pair.split("=", 1) for pair in args.token) if args.token else {}
    try:
        local = LocalRuntime(
            LocalOptions(
                host=args.host,
                port=args.port,
                auth=args.auth,
                dev_tokens=tokens,
                push_secret=args.push_secret,
                push=not args.no_push,
                a2a_wait_ms=args.wait_ms,
                examples=not args.no_examples,
                agents=args.agents,
                model=args.model,
                allowed_origins=args.allow_origin or [],
                allow_remote_without_auth=args.allow_remote_without_auth,
                connections=args.connections,
                **({"push_processes": args.push_processes} if args.push_processes is not None else {}),
            )
        )
    except ValueError as exc:
        print(f"nylorun serve: {exc}", file=sys.stderr)
        return 2
    stopped_by = ""
    try:
        with _signals_stop():
            try:
                try:
                    _announce(local, args)
                except ValueError as exc:  # an Agent --agents names cannot be loaded: say why, no traceback
                    print(f"nylorun serve: {exc}", file=sys.stderr)
                    return 2
                local.serve_forever(_console(local, args))
            except KeyboardInterrupt:
                stopped_by = "SIGINT"
            except _Stop:
                stopped_by = "SIGTERM"
    finally:
        local.stop()
    if stopped_by:
        print(f"Nylorun Runtime stopped ({stopped_by}): the api, the pollers and moto are down.", flush=True)
    return 0


def _announce(local: LocalRuntime, args: argparse.Namespace) -> None:
    runtime = local.prepare()
    _say("Nylorun Runtime (local: moto stands in for AWS, nothing leaves this machine)")
    yours = f"--agents {args.agents}" if args.agents is not None else "any in $NYLORUN_AGENTS"
    if local.options.examples:
        _say(f"  Agents: the examples ({EXAMPLE_AGENTS}; --no-examples leaves them out) and {yours}")
    else:
        _say(f"  Agents: {yours} (--no-examples)")
    if local.options.model:
        _say(f"  model: {local.options.model} (a stand-in that says so in its replies; no model is called locally)")
    for name in runtime.registry.names():
        _say(f"  {name:<8} {local.agent_url(name)}/.well-known/agent-card.json")
    if not runtime.registry.names():
        _say("  (none: every Agent URL answers 404; name yours with --agents module:attribute)")
    if args.auth == "dev":
        for token, subject in local.options.dev_tokens.items():
            _say(f"  bearer token for subject {subject!r}: {token}")
    else:
        _say("  auth: none (every caller is the subject 'anonymous')")
    if local.options.push_secret and runtime.settings.push_signing == "per-subject":
        # Each caller verifies with its own key, derived from this secret. No receiver needs the secret, and
        # whoever holds it can sign for any subject: it is not shown (it is the one given, or generated for this run).
        _say("  push: signed with each caller's own key (the Runtime's push secret is not shown)")
        names = runtime.registry.names()
        agent = local.agent_url(names[0]) if names else f"{local.base_url}/v1/a2a/agents"
        _say(f"  receive your pushes: NYLORUN_TOKEN=<your token> nylorun webhooks --from {agent}")
    elif local.options.push_secret:
        _say(f"  push secret (NYLORUN_PUSH_SIGNING=shared: every receiver verifies with it): {local.options.push_secret}")
    else:
        _say("  push: off (the cards say pushNotifications: false; push methods answer -32003)")
    _say(f"  blocking SendMessage waits up to {runtime.settings.a2a_wait_ms} ms")
    _say("  stop it with ^C (or SIGTERM)")
    if "echo" in runtime.registry.names():
        _say("Try:")
        first = next(iter(local.options.dev_tokens), "")
        auth_header = f" -H 'Authorization: Bearer {first}'" if args.auth == "dev" else ""
        _say(
            f"  curl -s {local.agent_url('echo')} -H 'A2A-Version: 1.0' -H 'Content-Type: application/json'{auth_header} \\\n"
            """    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":"""
            """{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'"""
        )
    sys.stdout.flush()


def _console(local: LocalRuntime, args: argparse.Namespace) -> Callable[[Any], Any]:
    """The console at /console, its URL (with this run's key) in the banner; the first dev token its default."""
    from nylorun_local.console_mount import PREFIX, with_console

    key = secrets.token_urlsafe(24)
    names = local.runtime.registry.names() if local.runtime is not None else []
    token = next(iter(local.options.dev_tokens), None) if args.auth == "dev" else None
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    _say(f"Console: http://{host}:{local.options.port}{PREFIX}/?k={key}")
    sys.stdout.flush()
    return lambda api: with_console(api, key, agents=[local.agent_url(n) for n in names], token=token)


def _say(line: str) -> None:
    # Agent names and token subjects are the operator's own words, but a banner is read in a terminal: no control
    # sequence in them reaches it.
    print(clean(line))


def _wait_ms(value: str) -> int:
    # The Runtime's own bounds for a2aWaitMs (settings): 0 to 15 minutes.
    if not value.isdigit() or int(value) > 900_000:
        raise argparse.ArgumentTypeError("a whole number of milliseconds from 0 to 900000")
    return int(value)


def add_serve_command(commands: Any) -> None:
    """`nylorun serve` on the `nylorun` command's subparsers (nylorun_client.command)."""
    serve = commands.add_parser("serve", help="start the local Runtime (moto for AWS, all in-process)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--auth", choices=["dev", "none"], default="dev")
    serve.add_argument(
        "--token", action="append", metavar="TOKEN=SUBJECT", help="a dev bearer token and its subject (repeatable)"
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="a web page (scheme://host[:port]) whose scripts may call; browsers' requests from any other are refused",
    )
    serve.add_argument(
        "--allow-remote-without-auth",
        action="store_true",
        help="allow --auth none with a --host other than loopback (anyone who reaches it calls as 'anonymous')",
    )
    serve.add_argument(
        "--model",
        choices=["scripted"],
        default=None,
        help="the model model-backed Agents call: locally only the scripted stand-in (also serves the `assistant` example)",
    )
    serve.add_argument(
        "--connections",
        metavar="FILE",
        default=None,
        help="a JSON list of OAuth 2.0 connection providers (see docs/writing/connections.md, Providers); with the "
        "examples, the example payments provider runs on loopback",
    )
    serve.add_argument("--push-secret", default=None, help="whsec_… (default: $NYLORUN_PUSH_SECRET, else generated)")
    serve.add_argument("--no-push", action="store_true", help="serve without push notifications (no push secret)")
    serve.add_argument(
        "--push-processes",
        type=int,
        default=None,
        metavar="N",
        help="run the push function's environments as N processes of their own, as Lambda does "
        "(default: $NYLORUN_LOCAL_PUSH_PROCESSES, else threads of this process)",
    )
    serve.add_argument(
        "--wait-ms",
        type=_wait_ms,
        default=None,
        metavar="N",
        help="how long a blocking SendMessage waits before answering (a2aWaitMs; default 300000)",
    )
    serve.add_argument(
        "--no-examples",
        action="store_true",
        help=f"serve only your own Agents (--agents or $NYLORUN_AGENTS), not the examples ({EXAMPLE_AGENTS})",
    )
    serve.add_argument(
        "--agents",
        default=None,
        metavar="MODULE:ATTRIBUTE,…",
        help="your Agents, as the stack's Agents parameter names them (default: $NYLORUN_AGENTS)",
    )
    serve.add_argument(
        "--agents-dir",
        default="agents",
        metavar="DIR",
        help="imported from first, as AgentsLayer's folder is when deployed (default: ./agents, when it exists)",
    )
    serve.set_defaults(run=_serve)
