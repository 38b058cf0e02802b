"""moto's DynamoDB Query sorts every item of the table to find one partition's, and tests and sizes all of them.

Written for moto 5.2.5 (pinned in pyproject.toml). Only makes the local stand-in faster (moto's answer is right; a
Query costs the whole table: bench/README.md, "The local stand-in's patches", has the numbers). A Query of the table
itself (no index) reads its partition, and a first page only the items it can hold (`_first_of_page`).
tests/integration/test_local_aws.py (a Query of one partition pages as DynamoDB does) fails if moto changes under it.
"""

from __future__ import annotations

from typing import Any

from nylorun_local.moto.patching import once, replace


def _first_of_page(partition: list[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The items a first page of a Query of one partition can hold: those its key condition keeps, in key order,
    `Limit` + 1 of them (moto needs the one after the page to say there is more). moto tests the condition and
    sizes every item of the partition for every page: a page of 11 of a task's 1,000 push configs took 16 ms, 10 ms
    with this (7 ms with the serializer's memo, attribute_keys.py). Items are compared by the same values
    moto's own sort and condition use (`cast_value`); a page that starts after a key (ExclusiveStartKey) or uses
    legacy filters is left to moto whole. A FilterExpression is applied after the Limit, on DynamoDB and in moto, so
    it does not change which items a page reads."""
    from moto.dynamodb.comparisons import get_comparison_func

    names = ("range_comparison", "range_objs", "limit", "exclusive_start_key", "scan_index_forward")
    known = {*names, "projection_expressions", "index_name", "consistent_read", "filter_expression",
             "hash_key_conditions", "range_key_conditions"}  # fmt: skip
    given = dict(zip(names, args, strict=False)) | {name: kwargs[name] for name in names if name in kwargs}
    legacy_filters = set(kwargs) - known
    if given.get("exclusive_start_key") is not None or legacy_filters or not partition or partition[0].range_key is None:
        return partition
    if given.get("range_comparison"):
        compare = get_comparison_func(given["range_comparison"])
        values = [value.cast_value for value in given.get("range_objs") or ()]
        partition = [item for item in partition if compare(item.range_key.cast_value, *values)]
    partition.sort(key=lambda item: item.range_key.cast_value, reverse=given.get("scan_index_forward") is False)
    return partition[: given["limit"] + 1] if given.get("limit") else partition


@once
def install() -> None:
    from moto.dynamodb.models.table import Table

    original_query = Table.query

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        # moto finds a Query's items by sorting every item of the table and keeping the partition's, so each
        # Query costs the whole table (19 ms a page for one task's 1,000 push configs, and more as a session's
        # table grows). A Query of the table itself (no index) reads only its partition; moto sorts the
        # result by range key as before. Under the DynamoDB lock (dynamodb_thread_safety.py), like every request.
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        if index_name or hash_key is None:
            return original_query(self, hash_key, *args, **kwargs)
        rows = self.items.get(hash_key)
        partition = list(rows.values()) if isinstance(rows, dict) else [rows] if rows is not None else []
        partition = _first_of_page(partition, args, kwargs)
        self.all_items = lambda: partition  # this call's view of the table, removed after
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    replace(__name__, Table, "query", query)
