"""`nylorun console [AGENT_URL ...] [--port P]`: serve the console on loopback and print its URL (opens nothing)."""

from __future__ import annotations

import argparse
import secrets
import socket
from typing import Any

from nylorun_client.safe import clean

HOST = "127.0.0.1"  # loopback only: the page holds bearer tokens in the server's memory
DEFAULT_PORT = 8090


def _console(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        print("nylorun console needs uvicorn: pip install 'nylorun-runtime-aws[client]'")
        return 2
    from nylorun_client.console.app import console_app

    key = secrets.token_urlsafe(24)
    app = console_app(key, agents=list(args.agents))
    # The socket is bound first, so the URL printed names the port in use (--port 0: any free one).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, args.port))
    except OSError as exc:
        print(f"nylorun console: cannot listen on {HOST}:{args.port}: {exc.strerror}")
        return 2
    port = sock.getsockname()[1]
    print(clean(f"Nylorun console: http://{HOST}:{port}/?k={key}"), flush=True)
    print("  open it in your browser; the key in it is this run's (^C stops the console)", flush=True)
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off")).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn shuts down, then raises the ^C it caught: a stop asked for, not a failure
        pass
    print("Nylorun console stopped.", flush=True)
    return 0


def add_console_command(commands: Any) -> None:
    console = commands.add_parser("console", help="a web page on 127.0.0.1 to work with any A2A 1.0 Agent")
    console.add_argument("agents", nargs="*", metavar="AGENT_URL", help="Agents offered on the page to connect to")
    console.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any free one)")
    console.set_defaults(run=_console)
