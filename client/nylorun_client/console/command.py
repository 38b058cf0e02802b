"""`nylorun console [AGENT_URL ...] [--port P]`: serve the console on loopback and print its URL (opens nothing)."""

from __future__ import annotations

import argparse
import secrets
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
    config = uvicorn.Config(app, host=HOST, port=args.port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    server.config.setup_event_loop()

    async def announce_and_serve() -> None:
        await server.startup()
        if not server.started:
            return
        port = server.servers[0].sockets[0].getsockname()[1]
        print(clean(f"Nylorun console: http://{HOST}:{port}/?k={key}"), flush=True)
        print("  open it in your browser; the key in it is this run's (^C stops the console)", flush=True)
        await server.main_loop()
        await server.shutdown()

    import asyncio

    try:
        asyncio.run(announce_and_serve())
    except KeyboardInterrupt:
        pass
    return 0


def add_console_command(commands: Any) -> None:
    console = commands.add_parser("console", help="a web page on 127.0.0.1 to work with any A2A 1.0 Agent")
    console.add_argument("agents", nargs="*", metavar="AGENT_URL", help="Agents offered on the page to connect to")
    console.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any free one)")
    console.set_defaults(run=_console)
