"""The task store on one DynamoDB table (keys and indexes: `layout`, declared in template.yaml `TasksTable`).

One module per job — `turns` (opening turns, queueing on a busy context, handing it on), `reads` (a task, its
item), `listing` (ListTasks), `writes` (statuses, artifacts, history, answers), `messages` (message dedupe),
`journal`, `push` (push configs and their sweep), `receivers` (push receivers' breakers and budgets), `files` (file versions), `retention` (what goes when a task
expires) — over `table` (AWS errors translated, named transactions, the one retry policy), `codec` (records ↔
plain items ↔ attribute values, page tokens, which the in-memory store uses too) and `salvage` (lenient reads).
`stream` decodes the change stream into `nylorun.events` changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nylorun.adapters.dynamodb.deliveries import Deliveries
from nylorun.adapters.dynamodb.files import FileVersions
from nylorun.adapters.dynamodb.journal import Journal
from nylorun.adapters.dynamodb.listing import TaskListing
from nylorun.adapters.dynamodb.messages import Messages
from nylorun.adapters.dynamodb.push import PushConfigs
from nylorun.adapters.dynamodb.receivers import Receivers
from nylorun.adapters.dynamodb.retention import Retention
from nylorun.adapters.dynamodb.stream import decode_change, decode_expiry
from nylorun.adapters.dynamodb.table import Table
from nylorun.adapters.dynamodb.turns import Turns
from nylorun.adapters.dynamodb.writes import TaskWrites
from nylorun.domain.ids import derive_task_id, subject_key
from nylorun.domain.quotas import Quotas
from nylorun.limits import DEFAULT_MAX_TASK_BYTES, DEFAULT_RETENTION_SECONDS
from nylorun.ports import OperatorStore, Sealer, TaskStore
from nylorun.ports.delegation import CallbackReplays

# `derive_task_id` (the task-id rule, nylorun.domain.ids) stays importable here for the tests that use it.
__all__ = ["DynamoTaskStore", "decode_change", "decode_expiry", "derive_task_id", "subject_key"]


class DynamoTaskStore(
    Turns, TaskWrites, TaskListing, Messages, Journal, PushConfigs, FileVersions, Retention, Deliveries, Receivers
):
    """The `TaskStore` port on DynamoDB. Raises only domain errors (`nylorun.domain.errors`)."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        max_task_bytes: int = DEFAULT_MAX_TASK_BYTES,
        sealer: Sealer | None = None,
        quotas: Quotas | None = None,
        retention_seconds: int = DEFAULT_RETENTION_SECONDS,
    ) -> None:
        self._t = Table(client, table_name)
        self._max_task_bytes = max_task_bytes
        # Push credentials and callback tokens are sealed before they are written (template.yaml StackKey);
        # without a sealer (no key) they are stored as they are.
        self._sealer = sealer
        self._quotas = quotas or Quotas()
        self._retention = retention_seconds  # docs/operate.md#data-retention: from a task's end to its expiry


if TYPE_CHECKING:  # mypy fails here when the port changes and this adapter does not follow
    _store: TaskStore = DynamoTaskStore(None, "")
    _operators: OperatorStore = DynamoTaskStore(None, "")
    _replays: CallbackReplays = DynamoTaskStore(None, "")
