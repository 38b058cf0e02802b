"""`nylorun tasks`, `get` and `cancel`: list, show or cancel tasks, without following them."""

from __future__ import annotations

import argparse

from nylorun_client.cli.output import Output
from nylorun_client.cli.running import EXIT_OK, with_client
from nylorun_client.client import NylorunClient


def list_tasks(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        out.tasks(await client.list_tasks(context_id=args.context, state=args.state))
        return EXIT_OK

    return with_client(args, body)


def get(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        out.show(await client.get(args.task))
        return EXIT_OK

    return with_client(args, body)


def cancel(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        out.show(await client.cancel(args.task))
        return EXIT_OK

    return with_client(args, body)
