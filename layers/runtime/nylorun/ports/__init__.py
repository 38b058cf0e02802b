"""Every port the service and the turn engine speak to, with the records and errors they exchange.

Adapters (`nylorun.adapters`) implement these; wiring (`nylorun.wiring`) chooses which. The domain's errors
and `Owner` are re-exported here, since every store method raises or takes them.
"""

from nylorun.domain.errors import (
    ContextBusy,
    DuplicateMessage,
    InteractionClosed,
    NotInState,
    StateConflict,
    StoreError,
    StoreUnavailable,
    TooLarge,
    TurnCanceled,
    VersionConflict,
)
from nylorun.domain.ids import Owner
from nylorun.domain.quotas import QuotaExceeded, Quotas
from nylorun.ports.files import REFUSED_TAG, Fetcher, FileStore, FileTooLarge, StoredObject
from nylorun.ports.push import (
    PUSH_CREDENTIAL,
    TASK_TOKEN,
    AddressRefused,
    Delivery,
    DeliveryQueue,
    HttpResult,
    Sealer,
    Sender,
    SigningSecrets,
)
from nylorun.ports.runtime import ContextQueue, EventBus, TurnHandler, TurnOrchestrator
from nylorun.ports.tasks import (
    FileVersions,
    InvalidPageToken,
    JournalEntry,
    JournalKind,
    JournalStore,
    NewTurn,
    OperatorAction,
    OperatorLog,
    PushConfigStore,
    StoredPushConfig,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    TurnStore,
    with_task,
)
from nylorun.protocol.models import TaskStatus

__all__ = [
    "PUSH_CREDENTIAL",
    "REFUSED_TAG",
    "TASK_TOKEN",
    "AddressRefused",
    "ContextBusy",
    "ContextQueue",
    "Delivery",
    "DeliveryQueue",
    "DuplicateMessage",
    "EventBus",
    "Fetcher",
    "FileStore",
    "FileTooLarge",
    "FileVersions",
    "HttpResult",
    "InteractionClosed",
    "InvalidPageToken",
    "JournalEntry",
    "JournalKind",
    "JournalStore",
    "NewTurn",
    "NotInState",
    "OperatorAction",
    "OperatorLog",
    "Owner",
    "PushConfigStore",
    "QuotaExceeded",
    "Quotas",
    "Sealer",
    "Sender",
    "SigningSecrets",
    "StateConflict",
    "StoreError",
    "StoreUnavailable",
    "StoredObject",
    "StoredPushConfig",
    "TaskPage",
    "TaskQuery",
    "TaskRecord",
    "TaskStatus",
    "TaskStore",
    "TooLarge",
    "TurnCanceled",
    "TurnHandler",
    "TurnOrchestrator",
    "TurnStore",
    "VersionConflict",
    "with_task",
]
