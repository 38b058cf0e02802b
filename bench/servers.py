"""The three ASGI apps the protocol benchmark serves, each in its own uvicorn process (`--factory`):

* `ours`: the Runtime's api app on the in-memory store, orchestrator and queue (the `echo` Agent), the service
  called on the event loop (as under Mangum); `ours_threadpool`: the same with the threadpool hop uvicorn
  serves the local Runtime with;
* `reference`: the a2a-sdk 1.3.0 server: DefaultRequestHandler + InMemoryTaskStore + an echo AgentExecutor,
  mounted with create_agent_card_routes / create_jsonrpc_routes in Starlette;
* `ceiling`: a bare FastAPI route that answers every POST with a canned JSON-RPC result.
"""

from __future__ import annotations

import json

from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, TaskState
from fastapi import FastAPI, Request, Response
from nylorun.settings import Settings
from starlette.applications import Starlette

from bench.stack import memory_stack

OURS_PATH = "/v1/a2a/agents/echo"
REFERENCE_PATH = "/"
CEILING_PATH = "/rpc"

# What a GetTask of a finished echo task answers (the shape ours and the reference send back).
CANNED = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "1",
        "result": {
            "id": "5f0c9a52-58f4-5a8e-9b1e-0d2c4c1f2b10",
            "contextId": "0b7e7f3e-2d55-4c55-a0f4-3c1f7a2d9e61",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-11-30T12:00:00.000Z"},
            "history": [
                {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]},
                {"messageId": "a-1", "role": "ROLE_AGENT", "parts": [{"text": "hello"}]},
            ],
        },
    },
    separators=(",", ":"),
).encode()


def ours() -> FastAPI:
    # No authentication (the reference has none either): only the protocol layer is measured. The in-memory
    # adapters never block, so the service runs on the event loop, as it does under Mangum on Lambda.
    return memory_stack(Settings(auth="none")).app(hop_to_thread=False)


def ours_threadpool() -> FastAPI:
    """The same, each JSON-RPC call hopping to the threadpool, as the local Runtime serves (its adapters block)."""
    return memory_stack(Settings(auth="none")).app()


class EchoExecutor(AgentExecutor):
    """The reference's trivial agent: a task, then COMPLETED with the caller's text as the reply."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            assert context.message is not None and context.task_id and context.context_id
            task = new_task(
                context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message]
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.complete(
            updater.new_agent_message([Part(text=context.get_user_input() or "(no text)")])
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def reference() -> Starlette:
    card = AgentCard(
        name="echo",
        description="Replies with the text it received.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url="http://127.0.0.1/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Repeats your message back.", tags=["demo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(
        routes=[
            *create_agent_card_routes(agent_card=card),
            *create_jsonrpc_routes(request_handler=handler, rpc_url=REFERENCE_PATH),
        ]
    )


def ceiling() -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post(CEILING_PATH)
    async def rpc(request: Request) -> Response:
        await request.body()
        return Response(CANNED, media_type="application/json")

    return app
