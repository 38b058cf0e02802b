"""uvicorn's HTTP protocol with a header-read deadline: a connection that has not sent a whole request head in time
is closed, so half-sent connections cannot pile up and hold the server's sockets.

uvicorn 0.54 has no such setting: `timeout_keep_alive` runs only between requests and stops at the first byte of the
next one, so a client that sends part of a head (or nothing) kept its connection until it left. API Gateway does this
for the deployed Runtime; this is the local stand-in's own front door (`nylorun serve`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

# Generous for any real client on a network (a head is one packet), short enough that 1,000 idle sockets go quickly.
HEADER_SECONDS = 5.0


class HeaderDeadlineProtocol(H11Protocol):
    """H11Protocol whose every request head must arrive within HEADER_SECONDS of the connection opening, or of the
    previous response ending. The clock never restarts while a head is partly read: one byte every few seconds
    does not keep a connection open."""

    header_seconds = HEADER_SECONDS
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._watch_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _watch_head(self) -> None:
        # uvicorn makes a request's cycle once its head is complete; none, or a finished one, means a head is awaited.
        awaiting_head = self.cycle is None or self.cycle.response_complete
        if not awaiting_head or self.transport.is_closing():
            self._stop_head_timer()
        elif self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_seconds, self._head_too_slow)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()
