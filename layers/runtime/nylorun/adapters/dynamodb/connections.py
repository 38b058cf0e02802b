"""The `ConnectionStore` port on the task table (docs/writing/connections.md):

    CONN#<subject-key>   <agent>#<provider>   a connected account: its scopes, its tokens (sealed by the caller of
                                              this store, CONNECTION_PURPOSE), a version (refreshes race on it),
                                              `expiresAt` (TTL: an unused connection goes, each use moves it on)
    CSTATE#<digest>      START                a consent in flight, keyed by its state's digest; read once
                                              (a conditional delete), `expiresAt` (TTL) as well

Both partitions are outside the task stream's filters (they hold no task), and no value here is plaintext token.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from nylorun.adapters.dynamodb.table import aws, error_code
from nylorun.domain.connections import (
    CONNECTION_UNUSED_SECONDS,
    ConnectionKey,
    ConnectionStart,
    StoredConnection,
)
from nylorun.domain.ids import Owner, subject_key

if TYPE_CHECKING:
    from nylorun.ports.connections import ConnectionStore

_ser, _de = TypeSerializer(), TypeDeserializer()


def _key(key: ConnectionKey) -> dict[str, Any]:
    return {"PK": {"S": f"CONN#{subject_key(key.subject)}"}, "SK": {"S": f"{key.agent}#{key.provider}"}}


def _start_key(state_digest: str) -> dict[str, Any]:
    return {"PK": {"S": f"CSTATE#{state_digest}"}, "SK": {"S": "START"}}


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    return {name: _de.deserialize(value) for name, value in item.items()}


class DynamoConnectionStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._ddb = client
        self._table = table_name

    def _connection(self, item: dict[str, Any], subject: str) -> StoredConnection:
        plain = _plain(item)
        agent, provider = _agent_provider(str(plain["SK"]))
        return StoredConnection(
            key=ConnectionKey(subject, agent, provider),
            scopes=[str(s) for s in plain.get("scopes", [])],
            sealed_tokens=str(plain["tokens"]),
            version=int(plain["version"]),
            connected_at=int(plain.get("connectedAt", 0)),
            used_at=int(plain.get("usedAt", 0)),
        )

    def get_connection(self, key: ConnectionKey) -> StoredConnection | None:
        with aws("get connection"):
            item = self._ddb.get_item(TableName=self._table, Key=_key(key), ConsistentRead=True).get("Item")
        if item is None or int(_plain(item).get("expiresAt", 0)) < _now():
            return None  # TTL deletes within days of the expiry: an expired one is gone for the Runtime now
        return self._connection(item, key.subject)

    def put_connection(self, connection: StoredConnection, *, expect_version: int | None) -> bool:
        condition: dict[str, Any] = {}
        if expect_version is None:
            # A new connection replaces an old one: its version moves on from whatever was there.
            old = self.get_connection(connection.key)
            version = (old.version if old else 0) + 1
        else:
            # Two turns refreshing at once: the second's write finds the first's version and loses
            # (docs/writing/connections.md).
            version = expect_version + 1
            condition = {
                "ConditionExpression": "version = :v", "ExpressionAttributeValues": {":v": {"N": str(expect_version)}}
            }
        values = {
            "scopes": list(connection.scopes), "tokens": connection.sealed_tokens, "version": version,
            "connectedAt": connection.connected_at, "usedAt": connection.used_at,
            "expiresAt": connection.used_at + CONNECTION_UNUSED_SECONDS,
        }
        item = {**_key(connection.key), **{name: _ser.serialize(value) for name, value in values.items()}}
        with aws("put connection"):
            try:
                self._ddb.put_item(TableName=self._table, Item=item, **condition)
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    return False
                raise
        return True

    def touch_connection(self, key: ConnectionKey, used_at: int) -> None:
        with aws("touch connection"):
            try:
                self._ddb.update_item(
                    TableName=self._table, Key=_key(key),
                    UpdateExpression="SET usedAt = :u, expiresAt = :e", ConditionExpression="attribute_exists(PK)",
                    ExpressionAttributeValues={":u": {"N": str(used_at)},
                                               ":e": {"N": str(used_at + CONNECTION_UNUSED_SECONDS)}},
                )
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise

    def delete_connection(self, key: ConnectionKey) -> StoredConnection | None:
        with aws("delete connection"):
            old = self._ddb.delete_item(TableName=self._table, Key=_key(key), ReturnValues="ALL_OLD").get("Attributes")
        return self._connection(old, key.subject) if old else None

    def list_connections(self, subject: str) -> list[StoredConnection]:
        items: list[dict[str, Any]] = []
        request: dict[str, Any] = {
            "TableName": self._table, "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": f"CONN#{subject_key(subject)}"}},
        }
        with aws("list connections"):
            while True:
                page = self._ddb.query(**request)
                items += page.get("Items", [])
                if "LastEvaluatedKey" not in page:
                    break
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        now = _now()
        return [self._connection(i, subject) for i in items if int(_plain(i).get("expiresAt", 0)) >= now]

    def count_connections(self) -> dict[tuple[str, str], int]:
        # An operator's count (`nylorun admin connections`): a Scan of the connection items' keys only, never a
        # token (the projection leaves them out).
        counts: Counter[tuple[str, str]] = Counter()
        request: dict[str, Any] = {
            "TableName": self._table, "ProjectionExpression": "SK, expiresAt",
            "FilterExpression": "begins_with(PK, :p)", "ExpressionAttributeValues": {":p": {"S": "CONN#"}},
        }
        now = _now()
        with aws("count connections"):
            while True:
                page = self._ddb.scan(**request)
                # An expired one (its TTL not yet run) is not counted, as no turn can use it.
                counts.update(_agent_provider(str(_plain(i)["SK"])) for i in page.get("Items", [])
                              if int(_plain(i).get("expiresAt", 0)) >= now)
                if "LastEvaluatedKey" not in page:
                    break
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return dict(counts)

    def put_start(self, start: ConnectionStart) -> None:
        values = {
            "subject": start.owner.subject, "agent": start.owner.agent, "taskId": start.task_id,
            "interactionId": start.interaction_id, "provider": start.provider, "scopes": list(start.scopes),
            "verifier": start.sealed_verifier, "browser": start.browser_digest, "expiresAt": start.expires_at,
        }
        with aws("put connection start"):
            self._ddb.put_item(
                TableName=self._table, Item={**_start_key(start.state_digest), **{k: _ser.serialize(v) for k, v in values.items()}}
            )

    def take_start(self, state_digest: str, now: int) -> ConnectionStart | None:
        with aws("take connection start"):
            try:
                # Single use: the delete that returns it is conditional on it being there, so two callbacks with
                # one state cannot both read it.
                old = self._ddb.delete_item(
                    TableName=self._table, Key=_start_key(state_digest), ReturnValues="ALL_OLD",
                    ConditionExpression="attribute_exists(PK)",
                ).get("Attributes")
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    return None
                raise
        plain = _plain(old or {})
        if not plain or int(plain["expiresAt"]) <= now:
            return None
        return ConnectionStart(
            state_digest=state_digest, owner=Owner(str(plain["subject"]), str(plain["agent"])),
            task_id=str(plain["taskId"]), interaction_id=str(plain["interactionId"]), provider=str(plain["provider"]),
            scopes=tuple(str(s) for s in plain.get("scopes", [])), sealed_verifier=str(plain["verifier"]),
            browser_digest=str(plain["browser"]), expires_at=int(plain["expiresAt"]),
        )


def _agent_provider(sort_key: str) -> tuple[str, str]:
    agent, _, provider = sort_key.rpartition("#")
    return agent, provider


def _now() -> int:
    return int(time.time())


if TYPE_CHECKING:  # mypy fails here when the port changes and this adapter does not follow
    _store: ConnectionStore = DynamoConnectionStore(None, "")
