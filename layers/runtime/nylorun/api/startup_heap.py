"""Keeps what start-up built (imports, boto3 clients, the app) out of every later garbage collection."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any


def freeze_startup_heap() -> None:
    """A full collection walks every object the collector tracks, and stops the process while it does: with
    boto3, FastAPI and pydantic loaded that is ~100,000 objects that live as long as the process, so one
    collection held every request on the event loop for 100-400 ms on two busy cores (bench/README.md
    "Blocking SendMessage: how it waits"). Frozen (https://docs.python.org/3/library/gc.html#gc.freeze), they
    are never walked again; what requests make is collected as before."""
    gc.freeze()


@asynccontextmanager
async def frozen_after_startup(app: Any) -> AsyncIterator[None]:
    """ASGI lifespan: a server that starts the app (uvicorn) freezes the heap once the app is built."""
    freeze_startup_heap()
    yield
