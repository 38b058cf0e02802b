"""A core-tier Agent: the a2a-sdk 1.3.0 reference server (DefaultRequestHandler, InMemoryTaskStore), no Profile
extension in its card. It asks a question as plain text (INPUT_REQUIRED), then echoes the answer (COMPLETED)."""

from __future__ import annotations

from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, TaskState
from starlette.applications import Starlette

QUESTION = "Which colour do you like? (plain text, core tier)"


class AskThenEcho(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        first = task is None
        if task is None:
            assert context.message is not None and context.task_id and context.context_id
            task = new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message])
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if first:
            await updater.requires_input(updater.new_agent_message([Part(text=QUESTION)]))
            return
        await updater.complete(updater.new_agent_message([Part(text=f"You like {context.get_user_input()}.")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def core_app(url: str) -> Starlette:
    card = AgentCard(
        name="core-echo",
        description="A plain A2A 1.0 Agent: a text question, then an echo.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Asks, then repeats.", tags=["demo"])],
    )
    handler = DefaultRequestHandler(agent_executor=AskThenEcho(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(
        routes=[*create_agent_card_routes(agent_card=card), *create_jsonrpc_routes(request_handler=handler, rpc_url="/")]
    )
