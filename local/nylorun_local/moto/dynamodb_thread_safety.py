"""moto's DynamoDB is not thread-safe: a transaction deep-copies a table while another request writes it.

Written for moto 5.2.5 (pinned in pyproject.toml). Fixes a real moto bug (DynamoDB has no such race): a
TransactWriteItems copies every table it touches for its rollback, and a PutItem on another of the server's threads
meanwhile breaks the copy with "dictionary changed size during iteration". DynamoDB requests are serialized.
tests/integration/test_moto_patches.py (test_a_transaction_and_a_concurrent_put_both_succeed: the put made from
inside the copy) shows moto's behaviour without this patch, and says "moto fixed this: remove the patch" when moto
no longer has it; the e2e tests, which write from many threads at once, fail if moto's request handling changes.
"""

from __future__ import annotations

from typing import Any

from nylorun_local.moto.patching import dynamodb_lock, once, replace


@once
def install() -> None:
    from moto.dynamodb.responses import DynamoHandler

    original_call = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with dynamodb_lock:
            return original_call(self)

    replace(__name__, DynamoHandler, "call_action", call_action)
