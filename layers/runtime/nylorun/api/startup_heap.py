"""Keeps what lives as long as the process out of the garbage collector's full collections.

A full collection walks every object the collector tracks and stops the process while it does. Two kinds of
objects live as long as the process and would be walked by every one of them:

* what start-up built (imports, boto3 clients, the app): with boto3, FastAPI and pydantic loaded ~100,000
  objects, so one collection held every request on the event loop for 100-400 ms on two busy cores;
* what a long-running process keeps (the local Runtime's stores, moto's tables): some 35 objects per task, so
  after 20,000 tasks a full collection took 200-500 ms and set blocking SendMessage's p99 (bench/README.md
  "Blocking SendMessage: how it waits").

Both are frozen (https://docs.python.org/3/library/gc.html#gc.freeze): start-up's heap once the app is built,
and after each full collection what survived it, so the next one walks only what came since. A frozen object is
still freed when its last reference goes (reference counting is untouched); only one that later ends in a
reference cycle is never collected. What requests make dies young and is collected as before.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

_OLDEST = 2  # the generation a full collection collects


def freeze_startup_heap() -> None:
    """Freeze what start-up built, and from now on what each full collection leaves alive."""
    gc.freeze()
    if _freeze_survivors not in gc.callbacks:
        gc.callbacks.append(_freeze_survivors)


def _freeze_survivors(phase: str, info: dict[str, int]) -> None:
    # Called by the collector when a collection starts and stops; freezing at the stop of a full one moves
    # exactly its survivors (every tracked object is then in the oldest generation) out of the next ones.
    if phase == "stop" and info["generation"] == _OLDEST:
        gc.freeze()


def thaw_heap() -> None:
    """Undo `freeze_startup_heap` when what it froze may end before the process does (a Runtime stopped inside a
    longer process, a test's app): frozen, its reference cycles would never be collected."""
    if _freeze_survivors in gc.callbacks:
        gc.callbacks.remove(_freeze_survivors)
    gc.unfreeze()


@asynccontextmanager
async def frozen_after_startup(app: Any) -> AsyncIterator[None]:
    """ASGI lifespan: a server that starts the app (uvicorn) freezes the heap once the app is built, and thaws
    it when the app shuts down."""
    freeze_startup_heap()
    try:
        yield
    finally:
        thaw_heap()
