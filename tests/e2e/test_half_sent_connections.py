"""End to end, raw sockets on loopback: `nylorun serve` closes connections that do not finish their request head within
a few seconds (nylorun_local/header_deadline.py), so half-sent connections cannot pile up; it kept 1,100 of them open
for as long as their clients liked. The waits below are bounds on a loop, not timed assertions."""

from __future__ import annotations

import selectors
import socket
import time

import httpx
import pytest
from conftest import auth, user_message
from nylorun_local.runtime import LocalRuntime

pytestmark = pytest.mark.e2e

HALF_HEAD = b"POST /v1/a2a/agents/echo/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
# Far past the deadline (5 s), so only a server that never closes them fails the count.
BOUND_SECONDS = 60


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1024) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except BlockingIOError:
        return False


def test_1100_half_sent_connections_are_all_closed_and_the_runtime_still_serves(local_runtime: LocalRuntime) -> None:
    # Given 1,100 connections: 1,000 that sent part of a request head and stopped, 100 that sent nothing at all
    port = local_runtime.options.port
    sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(1100)]
    selector = selectors.DefaultSelector()
    try:
        for index, sock in enumerate(sockets):
            if index < 1000:
                sock.sendall(HALF_HEAD)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        # When the clients wait (up to a bound far past the deadline) for the server to hang up
        closed = 0
        stop = time.monotonic() + BOUND_SECONDS
        while closed < len(sockets) and time.monotonic() < stop:
            for key, _ in selector.select(timeout=1):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if closed_by_server(sock):
                    selector.unregister(sock)
                    closed += 1
        # Then the server closed every one of them
        assert closed == len(sockets)
        # And a whole request is still served as usual
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": user_message("still here")}}
        answer = httpx.post(local_runtime.agent_url("echo"), json=body, headers=auth(), timeout=30).json()
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
    finally:
        selector.close()
        for sock in sockets:
            sock.close()


def test_a_head_trickled_one_byte_at_a_time_does_not_keep_its_connection(local_runtime: LocalRuntime) -> None:
    # Given a client that sends its head one byte every half second (each byte alone would reset an idle timer)
    sock = socket.create_connection(("127.0.0.1", local_runtime.options.port))
    sock.setblocking(False)
    try:
        closed, sent = False, 0
        # When it keeps trickling, up to its whole (never finished) head: 88 bytes, 44 s, far past the deadline
        while not closed and sent < len(HALF_HEAD):
            try:
                sock.send(HALF_HEAD[sent : sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            sent += 1
            time.sleep(0.5)
            closed = closed_by_server(sock)
        # Then the server hung up on it before its head was complete
        assert closed
    finally:
        sock.close()
