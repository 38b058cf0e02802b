"""moto 5.2.5's fixes for the local stand-in, one module per patch (each says why), applied in order by `install_all`.

Each module's docstring says what moto does wrong or slowly, whether it is a real moto bug or only a speed-up, and
the test that fails if moto changes under it. The real bugs have minimal reproductions in
tests/integration/test_moto_patches.py; the speed-ups are measured by `python -m bench.moto_patches`.
No module imports moto before its `install()` runs (the unit tier never imports moto).
"""

from __future__ import annotations

from nylorun_local.moto import (
    attribute_keys,
    dispatch_listing,
    dynamodb_item_size,
    dynamodb_query_partition,
    dynamodb_thread_safety,
    dynamodb_transaction_snapshot,
    memoized_names,
    plain_json,
    sfn_parse_once,
    sqs_clock,
    sqs_counted_once,
    sqs_fifo_release,
    sqs_group_rotation,
    sqs_serialized,
)

# In this order: sqs_serialized wraps the receive the two before it make, and takes the lock around the counted
# operations (sqs_counted_once); the rest touch methods no other patch does.
PATCHES = (
    dynamodb_thread_safety,
    dynamodb_transaction_snapshot,
    dynamodb_item_size,
    dynamodb_query_partition,
    sqs_fifo_release,
    sqs_group_rotation,
    sqs_clock,
    sqs_counted_once,
    sqs_serialized,
    plain_json,
    dispatch_listing,
    attribute_keys,
    memoized_names,
    sfn_parse_once,
)


def install_all() -> None:
    """Every patch, once per process (each install runs once, under the install lock)."""
    for patch in PATCHES:
        patch.install()
