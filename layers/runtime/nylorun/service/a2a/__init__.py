"""The A2A service: one method per A2A operation, scoped to the caller (Profile v2: the subject the caller
authenticated as, and the Agent it called). It speaks to ports only; the JSON-RPC layer parses and maps.

One module per group of operations, composed here into `A2AService` — `messages` (SendMessage), with
`replies` (an answer to an interrupted task) and `files` (a caller's inbound files); `tasks` (GetTask,
ListTasks, CancelTask); `push_configs` (the four push-config operations) — over `base` (the ports, and a
caller's own tasks as it sees them), `caller` (`Caller`) and `refusals` (quota and size-budget errors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nylorun.engine.agent import AgentRegistry
from nylorun.engine.files import FileService
from nylorun.ports import TaskStore, TurnOrchestrator
from nylorun.service.a2a.caller import Caller
from nylorun.service.a2a.messages import Messages
from nylorun.service.a2a.push_configs import PushConfigs
from nylorun.service.a2a.tasks import Tasks
from nylorun.service.scheduler import TurnScheduler
from nylorun.settings import Settings

if TYPE_CHECKING:  # made by wiring when first used: standardwebhooks and the A2A client stay out of cold start
    from nylorun.service.connections import ConnectionFlow
    from nylorun.service.delegation import DelegationCallbacks

__all__ = ["A2AService", "Caller"]


class A2AService(Messages, Tasks, PushConfigs):
    def __init__(
        self,
        store: TaskStore,
        orchestrator: TurnOrchestrator,
        registry: AgentRegistry,
        settings: Settings,
        scheduler: TurnScheduler,
        files: FileService | None = None,
        delegations: DelegationCallbacks | None = None,
        connections: ConnectionFlow | None = None,
    ) -> None:
        self._connections = connections  # docs/writing/connections.md: what a typed answer to a connection may say
        # docs/writing/delegation.md: cancel is real, a canceled task's delegates are canceled too.
        self._delegations = delegations
        self._files = files
        self._store = store
        self._orchestrator = orchestrator
        self._scheduler = scheduler
        self._registry = registry
        self._settings = settings
