"""ListTasks: a subject's (or one context's) tasks, newest status first, a page at a time."""

from __future__ import annotations

import time
from typing import Any

from nylorun.adapters.dynamodb import codec, layout, salvage
from nylorun.adapters.dynamodb.table import Table, aws
from nylorun.ports import Owner, TaskPage, TaskQuery, TaskRecord
from nylorun.protocol.models import format_timestamp


class TaskListing:
    _t: Table

    def _with_metadata(self, item: dict[str, Any]) -> TaskRecord:
        """The task item's record with its metadata, read from the META item when it lives there."""
        record = codec.task_record(item)
        if item.get("metadataItem"):
            meta = self._t.get(layout.metadata(record.task_id))
            record.metadata = salvage.metadata(meta["body"], record.task_id) if meta else None
        return record

    def list_tasks(self, owner: Owner, query: TaskQuery) -> TaskPage:
        index, pk_name, sk_name, pk = (
            (layout.BY_CONTEXT, "GSI2PK", "GSI2SK", f"{layout.owner_key(owner)}#{query.context_id}")
            if query.context_id is not None
            else (layout.BY_SUBJECT, "GSI1PK", "GSI1SK", layout.owner_key(owner))
        )
        key_condition = f"{pk_name} = :pk"
        values: dict[str, Any] = {":pk": pk}
        if query.status_after is not None:
            # docs/protocol.md §7.2 (ListTasks): keep tasks whose status.timestamp >= statusTimestampAfter. The sort key
            # starts with the fixed-width timestamp, so this is a key condition, not a filter.
            key_condition += f" AND {sk_name} >= :after"
            values[":after"] = format_timestamp(query.status_after)
        base: dict[str, Any] = {
            "IndexName": index,
            "KeyConditionExpression": key_condition,
            "ScanIndexForward": False,  # docs/protocol.md §7.3: most recently updated first
        }
        # docs/operate.md#data-retention: an expired task is gone from the list too, before TTL deletes it.
        filters = ["(attribute_not_exists(expiresAt) OR expiresAt > :now)"]
        values[":now"] = int(time.time())
        if query.state is not None:
            filters.append("#state = :state")
            base["ExpressionAttributeNames"] = {"#state": "state"}
            values[":state"] = query.state.value
        base["FilterExpression"] = " AND ".join(filters)
        base["ExpressionAttributeValues"] = codec.to_item(values)
        # The token is bound to the whole query, statusTimestampAfter's value included.
        bound_to = codec.fingerprint([index, pk, key_condition, query.state, values.get(":after")])
        start: dict[str, Any] | None = None
        if query.page_token:
            key = codec.decode_token(query.page_token, bound_to)
            # A rewritten key (partial, another partition, before :after) is a DynamoDB ValidationException:
            # refuse it as a bad token instead.
            after = values.get(":after")
            if (
                not isinstance(key, dict)
                or set(key) != {"PK", "SK", pk_name, sk_name}
                or not all(isinstance(v, str) for v in key.values())
                or key[pk_name] != pk
                or (after and key[sk_name] < after)
            ):
                raise codec.invalid_token()
            start = codec.to_item(key)

        total = 0
        found: list[dict[str, Any]] = []
        wanted = query.page_size + 1  # one more tells whether a next page exists
        with aws("query"):
            for page in self._t.db.get_paginator("query").paginate(TableName=self._t.name, Select="COUNT", **base):
                total += int(page["Count"])
            kwargs = dict(base)
            if start:
                kwargs["ExclusiveStartKey"] = start
            while len(found) < wanted:
                out = self._t.db.query(TableName=self._t.name, Limit=max(wanted * 2, 20), **kwargs)
                found.extend(codec.from_item(i) for i in out.get("Items", []))
                if "LastEvaluatedKey" not in out:
                    break
                kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
        page_items = found[: query.page_size]
        tokens = [codec.encode_token({k: i[k] for k in ("PK", "SK", pk_name, sk_name)}, bound_to) for i in page_items]
        return TaskPage(
            tasks=[self._with_metadata(i) for i in page_items],
            next_page_token=tokens[-1] if len(found) > query.page_size else "",
            total_size=total,
            tokens=tokens,
        )
