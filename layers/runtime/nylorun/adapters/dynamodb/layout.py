"""The item layout of the task table (`TasksTable` in template.yaml): every key the store writes, in one place.

Items (PK / SK):
    TASK#<task>      TASK            the task: state, status JSON, open interaction, plan, counters (its push
                                     configs: `pushConfigs`), its attempt, GSI keys, the lost effect it waits
                                     on an operator for (`uncertainEffect`, `uncertainSeq`, `uncertainAttempt`),
                                     metadata when small, `contentBytes` (history + artifacts, the size budget),
                                     `expiresAt` once it has ended (docs/operate.md#data-retention: everything
                                     below that belongs to the task goes with it,
                                     adapters/dynamodb/retention.py)
    TASK#<task>      META            the task's metadata when larger than INLINE_METADATA_BYTES (written once)
    TASK#<task>      MSG#<seq:08>    one history message (wire JSON); a caller's names its MID item (`sent`)
    TASK#<task>      ART#<artifact>  one artifact (wire JSON) and its order
    CTX#<agent>#<subject-key>#<context>    CTX    the context: turn counter, turns started, active task, open turns
    MID#<agent>#<subject-key>#<retry-key>  MID    which task a message made (duplicate sends)
    JRN#<task>       OP#<seq:05>     the turn journal: effects, interactions, usage, in code order
    JRN#<task>       WAIT#<interaction>  the Step Functions callback token of an open interaction
    JRN#<task>       OPLOG#<at>#<n>  an operator's action on the task (`nylorun admin`): who, what, when
    JRN#<task>       SEEN#<delivery> a delegate's delivery (webhook-id) taken already: its replay wakes nothing
    PUSH#<task>      CFG#<config>    a push notification config (`expiresAt`: TTL once its task ended)
    FANOUT#<task>    EVT#<event>     how far an event's fan-out got (the id of the last config queued; `expiresAt`)
    SUBJ#<subject-key>  QUOTA        the subject's open turns and the push configs of its open tasks (quotas)
    RCV#<receiver-key>  BREAKER      a subject's push receiver's breaker: consecutive failures, parked until, the
                                     one probe's claim (`expiresAt`); the key is a keyed digest of subject + origin
    RCV#<budget-key>    BUDGET#<w>   a subject's push delivery seconds reserved in budget window w (`expiresAt`)
    RCV#<webhook-id>    ATTEMPTS     a push delivery's failed attempts (written only when one fails; `expiresAt`)
    FILE#<scope>     PATH#<path>     the latest version number of an output path (kept, like CTX: per context)
    FILE#<scope>     W#<write-key>   the version one write got (a retried write keeps it)

Indexes:
    BySubject    GSI1PK = <agent>#<subject-key>            GSI1SK = <statusTimestamp>#<task>   (ListTasks)
    ByContext    GSI2PK = <agent>#<subject-key>#<context>  GSI2SK as GSI1SK         (ListTasks by contextId)
    PushConfigs  GSI3PK = PUSHCFG#<bucket 0..15>           GSI3SK = <task>#<config>  (the sweep; keys and
                 expiresAt; sparse: only push config items carry GSI3PK, so the sweep reads configs and nothing else)
    Uncertain    GSI4PK = UNCERTAIN                        GSI4SK = <since>#<task>  (`nylorun admin uncertain`, the
                 uncertainty gauge; sparse: a task item carries GSI4PK only while it waits for an operator, from the
                 status write that reports a lost outcome to the next status write, which removes it)

Every write that can race is conditional; task writes carry a version. `expiresAt` is the table's TTL
attribute.

Sizes (DynamoDB: 400 KB an item; see nylorun.limits): a message or an artifact is at most 256 KiB of JSON in
its own item; the task item holds one status message (256 KiB at most), the open interaction (64 KiB), the
plan (20 short steps) and at most 16 KiB of metadata, so a caller's metadata and an agent's reply never meet
in one item past the limit.
"""

from __future__ import annotations

import hashlib

from nylorun.domain.ids import subject_key
from nylorun.limits import KIB
from nylorun.ports import Owner

BY_SUBJECT, BY_CONTEXT, PUSH_CONFIGS, UNCERTAIN = "BySubject", "ByContext", "PushConfigs", "Uncertain"
# One partition for the whole Uncertain index: a lost outcome is rare (a crash inside an effect), and an operator
# reads them all at once. A partition takes 1,000 writes a second
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html).
UNCERTAIN_PK = "UNCERTAIN"
# The task item's attributes that mark it uncertain (all removed by the next status write).
UNCERTAIN_ATTRIBUTES = ("GSI4PK", "GSI4SK", "uncertainEffect", "uncertainSeq", "uncertainAttempt")
PUSH_BUCKETS = 16
# DynamoDB: 400 KB an item. Larger metadata (up to 256 KiB) leaves the task item for its own META item.
INLINE_METADATA_BYTES = 16 * KIB

Key = dict[str, str]


def owner_key(owner: Owner) -> str:
    return f"{owner.agent}#{subject_key(owner.subject)}"


def task(task_id: str) -> Key:
    return {"PK": f"TASK#{task_id}", "SK": "TASK"}


def task_pk(task_id: str) -> str:
    return f"TASK#{task_id}"


def task_id_of(pk: str) -> str:
    return pk.removeprefix("TASK#")


def metadata(task_id: str) -> Key:
    return {"PK": task_pk(task_id), "SK": "META"}


def message(task_id: str, seq: int) -> Key:
    return {"PK": task_pk(task_id), "SK": f"MSG#{seq:08d}"}


def artifact(task_id: str, artifact_id: str) -> Key:
    return {"PK": task_pk(task_id), "SK": f"ART#{artifact_id}"}


def context(owner: Owner, context_id: str) -> Key:
    return {"PK": f"CTX#{owner_key(owner)}#{context_id}", "SK": "CTX"}


def subject_quota(owner: Owner) -> Key:
    """The subject's quota counts (domain/quotas.py): one item per subject, whichever Agent it calls."""
    return {"PK": f"SUBJ#{subject_key(owner.subject)}", "SK": "QUOTA"}


def sent(owner: Owner, retry_key: str) -> Key:
    """The message-dedupe item: which task a message (its retry key) made."""
    return {"PK": f"MID#{owner_key(owner)}#{retry_key}", "SK": "MID"}


def journal_pk(task_id: str) -> str:
    return f"JRN#{task_id}"


def journal_op(task_id: str, seq: int) -> Key:
    return {"PK": journal_pk(task_id), "SK": f"OP#{seq:05d}"}


def operator_action(task_id: str, at: str, nonce: str) -> Key:
    return {"PK": journal_pk(task_id), "SK": f"OPLOG#{at}#{nonce}"}


def wait_token(task_id: str, interaction_id: str) -> Key:
    return {"PK": journal_pk(task_id), "SK": f"WAIT#{interaction_id}"}


def seen_delivery(task_id: str, delivery_id: str) -> Key:
    return {"PK": journal_pk(task_id), "SK": f"SEEN#{delivery_id}"}


def push_pk(task_id: str) -> str:
    return f"PUSH#{task_id}"


def push_config(task_id: str, config_id: str) -> Key:
    return {"PK": push_pk(task_id), "SK": f"CFG#{config_id}"}


def push_index(task_id: str, config_id: str) -> Key:
    """The sweep index's keys of a push config item (PushConfigs GSI)."""
    bucket = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) % PUSH_BUCKETS
    return {"GSI3PK": push_bucket(bucket), "GSI3SK": f"{task_id}#{config_id}"}


def fan_out(task_id: str, event_id: str) -> Key:
    return {"PK": f"FANOUT#{task_id}", "SK": f"EVT#{event_id}"}


def receiver(receiver_key: str) -> Key:
    return {"PK": f"RCV#{receiver_key}", "SK": "BREAKER"}


def subject_budget(budget_key: str, window: int) -> Key:
    return {"PK": f"RCV#{budget_key}", "SK": f"BUDGET#{window}"}


def delivery_attempts(webhook_id: str) -> Key:
    return {"PK": f"RCV#{webhook_id}", "SK": "ATTEMPTS"}


def push_bucket(bucket: int) -> str:
    return f"PUSHCFG#{bucket}"


def file_path(scope: str, path: str) -> Key:
    return {"PK": f"FILE#{scope}", "SK": f"PATH#{path}"}


def file_write(scope: str, write_key: str) -> Key:
    return {"PK": f"FILE#{scope}", "SK": f"W#{write_key}"}


def uncertain_keys(task_id: str, since: str) -> dict[str, str]:
    """The Uncertain index keys of a task item waiting for an operator (oldest first)."""
    return {"GSI4PK": UNCERTAIN_PK, "GSI4SK": f"{since}#{task_id}"}


def list_keys(owner: Owner, task_id: str, context_id: str, status_ts: str) -> dict[str, str]:
    """The ListTasks index keys of a task item."""
    key = owner_key(owner)
    sort = f"{status_ts}#{task_id}"
    return {"GSI1PK": key, "GSI1SK": sort, "GSI2PK": f"{key}#{context_id}", "GSI2SK": sort}
