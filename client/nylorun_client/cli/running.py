"""Run one client command: open the client, pick the output, and turn what happens into an exit code."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import cast

from nylorun_client import safe
from nylorun_client.cli.human import HumanOutput
from nylorun_client.cli.output import JsonOutput, Output
from nylorun_client.client import PROFILE_V2, NylorunClient
from nylorun_client.errors import error_line
from nylorun_client.prompts import PromptCancelled, cancelled_message

# Exit codes: 0 done (a task that ended COMPLETED), 1 an error or a task that ended otherwise,
# 3 the task still waits for a person: an answer this run did not give (stdin closed, or consent asked in
# text only), or an operator (an effect whose outcome was lost).
EXIT_OK, EXIT_ERROR, EXIT_WAITING, EXIT_INTERRUPTED = 0, 1, 3, 130


def with_client(args: argparse.Namespace, body: Callable[[NylorunClient, Output], Awaitable[int]]) -> int:
    # What a person reads passes safe.scrub (no Agent's or caller's control sequence reaches the terminal);
    # --json keeps the data exact and escapes the controls (safe.dumps).
    out: Output = JsonOutput() if args.json else cast(Output, safe.Scrubbing(HumanOutput()))
    extensions = () if args.core else PROFILE_V2
    client = NylorunClient(args.url, token=args.token, extensions=extensions)

    async def main() -> int:
        async with client:
            return await body(client, out)

    try:
        return asyncio.run(main())
    except PromptCancelled as cancelled:
        out.close()
        print(safe.clean(cancelled_message(cancelled.task, client.url)), file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        out.close()
        print("Stopped. The task goes on; see it with `nylorun get`.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        line = error_line(exc, client.url, server_error=client.last_error, token_given=bool(args.token))
        if line is None:
            raise  # a bug, not an expected error: the traceback helps
        out.close()
        print(safe.clean(line), file=sys.stderr)
        return EXIT_ERROR
