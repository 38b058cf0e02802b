"""The served api app keeps what lives as long as the process out of later full garbage collections (gc.freeze):
start-up's heap once the app is built, then what each full collection leaves alive, so a collection walks only
what came since its last one, not the ~100k objects of boto3, FastAPI and pydantic nor every task a long-running
Runtime holds (bench/README.md "Blocking SendMessage: how it waits")."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

from nylorun.api.app import create_app
from nylorun.api.auth import Authenticator
from nylorun.engine.agent import AgentRegistry
from nylorun.settings import Settings
from unit_support import agent_of, runtime


def _frozen(obj: object) -> bool:
    return not any(o is obj for o in gc.get_objects())


def _while_served(check: Callable[[], Any]) -> None:
    """Run `check` inside the api app's lifespan, as a server (uvicorn) runs it, from an unfrozen heap."""
    settings = Settings(auth="none")
    agent = agent_of(lambda turn: turn.reply("hi"))
    app = create_app(runtime(agent).service, AgentRegistry([agent]), settings, Authenticator(settings))

    async def serve() -> None:
        async with app.router.lifespan_context(app):
            check()

    gc.unfreeze()
    try:
        asyncio.run(serve())
    finally:
        gc.unfreeze()


def test_a_server_starting_the_app_freezes_what_start_up_built_and_thaws_it_at_shutdown() -> None:
    # Given an object made during start-up
    made_at_start_up = [object()]
    seen: dict[str, bool] = {}
    # When a server runs the app's lifespan
    _while_served(lambda: seen.update(frozen=_frozen(made_at_start_up)))
    # Then while it serves, that object is in the permanent generation: no collection walks it again
    assert seen["frozen"]
    # And once the app shut down the heap is thawed: what it froze can be collected again
    assert gc.get_freeze_count() == 0
    assert not _frozen(made_at_start_up)


def test_what_a_full_collection_leaves_alive_is_frozen_and_young_objects_are_not() -> None:
    seen: dict[str, bool] = {}

    def check() -> None:
        # Given a long-lived object made after start-up (a task the Runtime now holds)
        held = [object()]
        young_before = [object()]
        seen["before"] = _frozen(young_before)
        # When a full collection runs
        gc.collect()
        # Then it survived and is now frozen: the next full collection will not walk it
        seen["held"] = _frozen(held)
        # And what is made afterwards is walked as before
        seen["after"] = _frozen([object()])

    _while_served(check)
    assert seen == {"before": False, "held": True, "after": False}
