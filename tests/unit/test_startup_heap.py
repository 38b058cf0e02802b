"""The served api app keeps its start-up heap out of later garbage collections (gc.freeze): a full collection
then walks only what requests made, not the ~100k objects of boto3, FastAPI and pydantic (bench/README.md
"Blocking SendMessage: how it waits")."""

from __future__ import annotations

import asyncio
import gc

from nylorun.api.app import create_app
from nylorun.api.auth import Authenticator
from nylorun.engine.agent import AgentRegistry
from nylorun.settings import Settings
from unit_support import agent_of, runtime


def test_a_server_starting_the_app_freezes_what_start_up_built() -> None:
    # Given the api app, built as a server builds it, and an object made during start-up
    settings = Settings(auth="none")
    agent = agent_of(lambda turn: turn.reply("hi"))
    app = create_app(runtime(agent).service, AgentRegistry([agent]), settings, Authenticator(settings))
    made_at_start_up = [object()]
    gc.unfreeze()
    try:
        # When a server (uvicorn) runs the app's lifespan start-up
        async def start() -> None:
            async with app.router.lifespan_context(app):
                pass

        asyncio.run(start())
        # Then that object is in the permanent generation: no collection walks it again
        assert gc.get_freeze_count() > 0
        assert not any(o is made_at_start_up for o in gc.get_objects())
    finally:
        gc.unfreeze()
