"""moto's server answers one request at a time, its callers taking turns (the fair-push figure: bench/README.md).

On AWS, one caller's calls do not queue another's: each service has capacity far beyond one stack's. Locally, every
service is moto, in one interpreter: while one task's 1,000 push deliveries call it from every push environment,
each thread that answers them takes the interpreter lock in its turn, and another subject's calls (its fan-out step,
its delivery) wait behind all of them, and so does its turn, which runs in that same interpreter. So the server
answers one request at a time (the others wait on an event, not for the interpreter lock), and the waiting requests
are served by flow in turns: a request that comes with `FLOW_HEADER` belongs to that flow (the local push
environments send the task whose message they handle: `push_processes.py`), any other to its connection's.

Nothing here imports moto: the local stack's moto patches (aws.py) use `sleep`, and `make unit` imports no moto.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterator
from contextlib import contextmanager

FLOW_HEADER = "x-nylorun-local-flow"


class Turns:
    """One holder at a time; waiters served one flow after another (round robin), each flow's in arrival order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # flow → its waiters, in order
        self._waiting: OrderedDict[str, deque[threading.Event]] = OrderedDict()
        self._held = False
        self._holder = threading.local()  # does this thread hold the turn (for `sleep`)

    @property
    def waiting(self) -> int:
        """How many requests wait for their turn."""
        with self._lock:
            return sum(len(waiters) for waiters in self._waiting.values())

    @contextmanager
    def serving(self, flow: str) -> Iterator[None]:
        self._acquire(flow)
        self._holder.flow = flow
        try:
            yield
        finally:
            self._holder.flow = None
            self._release()

    def sleep(self, seconds: float) -> None:
        """Sleep; a thread holding the turn lets it go meanwhile (moto's long poll, between its looks at a queue)."""
        flow = getattr(self._holder, "flow", None)
        if flow is None:
            time.sleep(seconds)
            return
        self._holder.flow = None
        self._release()
        try:
            time.sleep(seconds)
        finally:
            self._acquire(flow)
            self._holder.flow = flow

    def _acquire(self, flow: str) -> None:
        with self._lock:
            if not self._held:
                self._held = True
                return
            ready = threading.Event()
            self._waiting.setdefault(flow, deque()).append(ready)
        ready.wait()  # handed the turn by `_release`: still held, now ours

    def _release(self) -> None:
        with self._lock:
            if not self._waiting:
                self._held = False
                return
            flow, waiters = next(iter(self._waiting.items()))
            waiters.popleft().set()
            if waiters:
                self._waiting.move_to_end(flow)  # its next waiter after every other flow's
            else:
                del self._waiting[flow]


# The one the local moto server and the local stack's moto patches share (one moto per process).
TURNS = Turns()
