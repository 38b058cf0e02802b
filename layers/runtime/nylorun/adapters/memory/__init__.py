"""The in-memory adapters: the task store composed of its aggregates, the orchestrator and the context queue.

The orchestrator runs each turn at once in the caller's thread. One process, no
AWS: the benchmarks use them to measure the protocol layer alone.

`InMemoryTaskStore` keeps the `TaskStore` contract the DynamoDB store keeps (same task ids, same conflicts,
same ListTasks order and paging, same errors), with one lock instead of conditional writes. What it keeps
goes through the DynamoDB store's codec (`nylorun.adapters.dynamodb.codec`): JSON values (metadata, messages,
artifacts, journal results and answers, push configs) come back as their JSON round trip, heads are the same
plain task items, page tokens are encoded alike. Records handed out are copies: changing one never changes the
store. The contract both stores keep is tests/integration/test_store_contract.py.

Like `nylorun.adapters.dynamodb`, one module per aggregate — `turns` (opening turns, queued turns, message
dedupe), `tasks` (reads, statuses, history, artifacts, answers), `journal` (and wait tokens), `operators`,
`push` (push configs and their sweep), `receivers` (push receivers' breakers and budgets), `files` (file versions), `retention` (what goes when a task expires) —
over `state` (the records they share and the lock). `queue` and `orchestrator` are the other two ports.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from nylorun.adapters.memory.deliveries import Deliveries
from nylorun.adapters.memory.files import FileVersions
from nylorun.adapters.memory.journal import Journal
from nylorun.adapters.memory.operators import Operators
from nylorun.adapters.memory.orchestrator import InMemoryOrchestrator
from nylorun.adapters.memory.push import PushConfigs
from nylorun.adapters.memory.queue import InMemoryContextQueue
from nylorun.adapters.memory.receivers import Receivers
from nylorun.adapters.memory.retention import Retention
from nylorun.adapters.memory.tasks import Tasks
from nylorun.adapters.memory.turns import Turns
from nylorun.domain.quotas import Quotas
from nylorun.limits import DEFAULT_MAX_TASK_BYTES, DEFAULT_RETENTION_SECONDS
from nylorun.ports import ContextQueue, OperatorStore, TaskStore, TurnOrchestrator
from nylorun.ports.delegation import CallbackReplays

__all__ = ["InMemoryContextQueue", "InMemoryOrchestrator", "InMemoryTaskStore"]


class InMemoryTaskStore(
    Turns, Tasks, Journal, Operators, PushConfigs, FileVersions, Retention, Deliveries, Receivers
):
    """The `TaskStore` port in one process's memory; thread-safe."""

    def __init__(
        self,
        max_task_bytes: int = DEFAULT_MAX_TASK_BYTES,
        quotas: Quotas | None = None,
        retention_seconds: int = DEFAULT_RETENTION_SECONDS,
    ) -> None:
        self._max_task_bytes = max_task_bytes
        self._retention = retention_seconds  # docs/operate.md#data-retention: from a task's end to its expiry
        self._quotas = quotas or Quotas()
        # The records every part shares (their shapes: `state.State`).
        self._subjects = {}
        self._lock = threading.RLock()
        self._tasks = {}
        self._contexts = {}
        self._messages = {}
        self._push = {}
        self._fan_out = {}
        self._file_heads = {}
        self._file_writes = {}
        self._seen_deliveries = {}
        self._receivers = {}
        self._probes = {}
        self._budgets = {}
        self._attempts = {}


if TYPE_CHECKING:  # `make typecheck` fails here when a port changes and these adapters do not follow
    _store: TaskStore = InMemoryTaskStore()
    _operators: OperatorStore = InMemoryTaskStore()
    _replays: CallbackReplays = InMemoryTaskStore()
    _orchestrator: TurnOrchestrator = InMemoryOrchestrator()
    _queue: ContextQueue = InMemoryContextQueue()
