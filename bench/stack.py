"""The Runtime's service and api app on the in-memory adapters: the whole protocol layer, no AWS."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI
from nylorun.adapters.memory import InMemoryContextQueue, InMemoryOrchestrator, InMemoryTaskStore
from nylorun.api.app import create_app
from nylorun.api.auth import Authenticator
from nylorun.engine.agent import AgentRegistry
from nylorun.engine.runner import TurnRunner
from nylorun.service.a2a import A2AService
from nylorun.service.scheduler import TurnScheduler
from nylorun.settings import Settings
from nylorun_examples import AGENTS


@dataclass(frozen=True)
class MemoryStack:
    settings: Settings
    registry: AgentRegistry
    store: InMemoryTaskStore
    service: A2AService

    def app(self, *, hop_to_thread: bool | None = None) -> FastAPI:
        return create_app(
            self.service, self.registry, self.settings, Authenticator(self.settings), hop_to_thread=hop_to_thread
        )


def memory_stack(settings: Settings, registry: AgentRegistry | None = None) -> MemoryStack:
    """Composed as nylorun.wiring composes the AWS adapters; turns run synchronously when they start."""
    registry = registry or AgentRegistry.from_env(AGENTS)
    store, orchestrator, queue = InMemoryTaskStore(settings.max_task_bytes), InMemoryOrchestrator(), InMemoryContextQueue()
    scheduler = TurnScheduler(store, orchestrator, queue)
    orchestrator.attach(TurnRunner(store, registry, orchestrator, on_ended=scheduler.ended))
    return MemoryStack(
        settings, registry, store, A2AService(store, orchestrator, registry, settings, scheduler)
    )
