"""The local Runtime's logs for a person at a terminal: an Agent's error as a readable traceback on stderr, and the
api's lines labelled as the api function's (the other functions label theirs as Lambda does: their handlers)."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TextIO

from aws_lambda_powertools.logging.lambda_context import build_lambda_context_model
from nylorun.engine.runner import AGENT_ERRORS
from nylorun.observability import logger

from nylorun_local.lambda_shim import LambdaContext

Scope = MutableMapping[str, Any]
Asgi = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class AgentErrors(logging.Handler):
    """An Agent's error (the turn function's "agent raised" line) also as Python prints it, under a header naming
    the Agent and the task; the JSON line stays as deployed (CloudWatch reads that one)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(logging.ERROR)
        self._stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is None or record.getMessage() not in AGENT_ERRORS:
            return
        # Called in the logging call's own context: the keys are that turn's (nylorun.observability).
        keys = logger.get_current_keys()
        header = f"Agent {keys.get('agent') or '?'!s} raised in task {keys.get('task_id') or '?'!s}:"
        stream = self._stream or sys.stderr
        stream.write(header + "\n" + "".join(traceback.format_exception(*record.exc_info)))
        stream.flush()


def labelled_as(function_name: str, app: Asgi) -> Asgi:
    """The api app, each request with the keys the api function's handler gives its lines when deployed
    (`logger.inject_lambda_context`): locally uvicorn serves the app without the handler."""

    async def serve(scope: Scope, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]) -> None:
        # In this request's own context (an asyncio task's): no other request sees these keys.
        logger.structure_logs(cold_start=False, **build_lambda_context_model(LambdaContext(function_name)).__dict__)
        await app(scope, receive, send)

    return serve
