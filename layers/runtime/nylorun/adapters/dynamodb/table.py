"""The table as the store's aggregates use it: AWS errors translated, named transactions, one retry policy.

- `aws()` turns every botocore error into a domain error (`StoreUnavailable`); no ClientError leaves the
  adapter.
- `Transaction` names each item it writes; when DynamoDB cancels it, `Canceled.failed(name)` says whether that
  item's condition failed (reasons are read by name, never by position) and `Canceled.old(name)` gives the
  item it found (ReturnValuesOnConditionCheckFailure).
- `RETRY` is the one policy of every optimistic loop: one time budget, jittered exponential backoff, then
  VersionConflict.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nylorun.adapters.dynamodb import codec
from nylorun.ports import StoreUnavailable, VersionConflict


@contextmanager
def aws(action: str) -> Iterator[None]:
    """AWS errors inside become StoreUnavailable (conditional failures are handled by the caller first)."""
    try:
        yield
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "Unknown")
        raise StoreUnavailable(f"{action}: {code}") from exc
    except BotoCoreError as exc:
        raise StoreUnavailable(f"{action}: {type(exc).__name__}") from exc


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


@dataclass(frozen=True)
class RetryPolicy:
    """One budget for every optimistic loop: retry while the budget lasts, with jittered backoff."""

    budget_seconds: float = 30.0
    base_delay: float = 0.005
    max_delay: float = 0.2

    def attempts(self, gave_up: str) -> Iterator[int]:
        """Yields attempt numbers; between attempts sleeps a jittered, growing delay; when the budget is
        spent raises VersionConflict(gave_up)."""
        deadline = time.monotonic() + self.budget_seconds
        attempt = 0
        while True:
            yield attempt
            attempt += 1
            if time.monotonic() > deadline:
                raise VersionConflict(gave_up)
            time.sleep(random.uniform(0, min(self.max_delay, self.base_delay * 2**attempt)))


RETRY = RetryPolicy()


class Canceled(Exception):
    """A transaction DynamoDB canceled: which named items failed their condition, and what they held."""

    def __init__(self, reasons: dict[str, dict[str, Any]]) -> None:
        super().__init__(", ".join(f"{k}: {v.get('Code')}" for k, v in reasons.items()))
        self._reasons = reasons

    def failed(self, name: str) -> bool:
        return self._reasons.get(name, {}).get("Code") == "ConditionalCheckFailed"

    def old(self, name: str) -> dict[str, Any]:
        return codec.from_item(self._reasons.get(name, {}).get("Item", {}))


class Transaction:
    """TransactWriteItems whose items have names. Keys, items and values are plain dicts (see `codec`)."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._names: list[str] = []
        self._items: list[dict[str, Any]] = []

    def _add(self, name: str, kind: str, body: dict[str, Any]) -> Transaction:
        if name in self._names:
            raise ValueError(f"two transaction items named {name}")
        self._names.append(name)
        self._items.append({kind: {"TableName": self._table.name, **body}})
        return self

    def put(self, name: str, item: dict[str, Any], condition: str | None = None,
            values: dict[str, Any] | None = None, *, return_old: bool = False) -> Transaction:
        body: dict[str, Any] = {"Item": codec.to_item(item)}
        body.update(_condition(condition, values))
        if return_old:
            body["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return self._add(name, "Put", body)

    def update(self, name: str, key: dict[str, Any], expression: str, condition: str | None = None,
               values: dict[str, Any] | None = None, names: dict[str, str] | None = None) -> Transaction:
        body: dict[str, Any] = {"Key": codec.to_item(key), "UpdateExpression": expression}
        body.update(_condition(condition, values, names))
        return self._add(name, "Update", body)

    def delete(self, name: str, key: dict[str, Any], condition: str | None = None,
               values: dict[str, Any] | None = None) -> Transaction:
        return self._add(name, "Delete", {"Key": codec.to_item(key), **_condition(condition, values)})

    def check(self, name: str, key: dict[str, Any], condition: str, values: dict[str, Any] | None = None,
              names: dict[str, str] | None = None) -> Transaction:
        return self._add(name, "ConditionCheck", {"Key": codec.to_item(key), **_condition(condition, values, names)})

    def write(self) -> None:
        """Commit; Canceled if DynamoDB canceled it (a condition failed or another transaction conflicted)."""
        try:
            self._table.db.transact_write_items(TransactItems=self._items)
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise StoreUnavailable(f"transaction: {error_code(exc)}") from exc
            reasons = exc.response.get("CancellationReasons", [])
            raise Canceled({name: dict(r) for name, r in zip(self._names, reasons, strict=False)}) from None
        except BotoCoreError as exc:
            raise StoreUnavailable(f"transaction: {type(exc).__name__}") from exc


def _condition(condition: str | None, values: dict[str, Any] | None,
               names: dict[str, str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if condition:
        body["ConditionExpression"] = condition
    if values:
        body["ExpressionAttributeValues"] = codec.to_item(values)
    if names:
        body["ExpressionAttributeNames"] = names
    return body


class Table:
    """The client and table name, with the reads every aggregate shares (consistent, plain dicts)."""

    def __init__(self, client: Any, table_name: str) -> None:
        self.db = client
        self.name = table_name

    def transaction(self) -> Transaction:
        return Transaction(self)

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        with aws("get_item"):
            out = self.db.get_item(TableName=self.name, Key=codec.to_item(key), ConsistentRead=True)
        return codec.from_item(out["Item"]) if "Item" in out else None

    def query_all(self, *, values: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        with aws("query"):
            pages = self.db.get_paginator("query").paginate(
                TableName=self.name, ExpressionAttributeValues=codec.to_item(values), **kwargs
            )
            for page in pages:
                items.extend(codec.from_item(i) for i in page.get("Items", []))
        return items

    def put(self, item: dict[str, Any]) -> None:
        with aws("put_item"):
            self.db.put_item(TableName=self.name, Item=codec.to_item(item))

    def delete(self, key: dict[str, Any], condition: str | None = None, values: dict[str, Any] | None = None) -> bool:
        """Delete the item (absent is fine); with a condition, only if it holds: False when it did not."""
        return self._conditional(
            "delete_item", self.db.delete_item, TableName=self.name, Key=codec.to_item(key), **_condition(condition, values)
        )

    def update(self, key: dict[str, Any], expression: str, condition: str, values: dict[str, Any],
               names: dict[str, str] | None = None) -> bool:
        """A conditional update; False when its condition failed."""
        return self._conditional(
            "update_item", self.db.update_item, TableName=self.name, Key=codec.to_item(key),
            UpdateExpression=expression, **_condition(condition, values, names),
        )

    @staticmethod
    def _conditional(action: str, call: Any, **request: Any) -> bool:
        """One conditional write: True when written, False when its condition failed; AWS errors as StoreUnavailable."""
        try:
            call(**request)
            return True
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise StoreUnavailable(f"{action}: {error_code(exc)}") from exc
        except BotoCoreError as exc:
            raise StoreUnavailable(f"{action}: {type(exc).__name__}") from exc
