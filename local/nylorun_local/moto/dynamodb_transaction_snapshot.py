"""moto's DynamoDB deep-copies each whole table a transaction touches (every item, every stream record), for its rollback.

Written for moto 5.2.5 (pinned in pyproject.toml). Only makes the local stand-in faster (the copy is right, just
slow: transactions slow down as the table grows; bench/README.md, "The local stand-in's patches", has the numbers).
Under the DynamoDB lock (dynamodb_thread_safety.py), a snapshot of just the items the transaction names (and the
stream's length) restores the same state on failure. tests/integration/test_store_contract.py (conditional writes
in a transaction, one that fails) and the e2e tests fail if moto's transaction changes under it.
"""

from __future__ import annotations

import copy
from typing import Any

from nylorun_local.moto.patching import once, replace


@once
def install() -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    original_transact = DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved: list[tuple[Any, Any, Any, Any]] = []
        streams: dict[int, tuple[Any, int]] = {}
        for entry in transact_items:
            op = next(iter(entry.values()))
            table = self.tables.get(op.get("TableName"))
            if table is None:
                continue
            key = op.get("Key") or op.get("Item") or {}
            if table.hash_key_attr not in key or (table.range_key_attr and table.range_key_attr not in key):
                continue  # malformed: moto rejects it before writing anything
            hash_key = DynamoType(key[table.hash_key_attr])
            range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
            row = table.items.get(hash_key)
            old = row.get(range_key) if range_key is not None and isinstance(row, dict) else row
            saved.append((table, hash_key, range_key, copy.deepcopy(old)))
            if table.stream_shard is not None:
                streams[id(table)] = (table.stream_shard, len(table.stream_shard.items))
        Table.__deepcopy__ = lambda table, memo: table  # type: ignore[attr-defined]  # no whole-table copy
        try:
            original_transact(self, transact_items)
        except Exception:
            for table, hash_key, range_key, old in reversed(saved):
                if range_key is None:
                    if old is None:
                        table.items.pop(hash_key, None)
                    else:
                        table.items[hash_key] = old
                elif old is None:
                    table.items.get(hash_key, {}).pop(range_key, None)
                else:
                    table.items[hash_key][range_key] = old
            for shard, length in streams.values():
                del shard.items[length:]  # no stream record for writes that were rolled back
            raise
        finally:
            del Table.__deepcopy__  # type: ignore[attr-defined]

    replace(__name__, DynamoDBBackend, "transact_write_items", transact_write_items)
