"""moto writes every DynamoDB answer by walking botocore's output shape member by member, even an item already in the wire's JSON.

Written for moto 5.2.5 (pinned in pyproject.toml). Only makes the local stand-in faster: the walk was an eighth of
the local stack's CPU while one task's 1,000 push configs were pushed, most of it for GetItem and Query answers
(bench/README.md, "The local stand-in's patches"). The answers of `PLAIN_JSON_OPERATIONS` are already the wire's
JSON (moto's own `dynamo_to_dict`: attribute values as `{type: value}`, numbers as strings), but for binary values
(bytes: base64 on the wire, as moto's serializer writes them), members that are None and members the operation's
output does not have (DeleteItem's `ConsumedCapacityUnits`), which the walk leaves out: written as they stand, the
same JSON the walk gives. tests/integration/test_local_aws.py compares the two, and fails if moto changes under it.
"""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from nylorun_local.moto.patching import once, replace

# DynamoDB operations whose answers hold items, keys, counts and capacities only: no timestamp, and below the top
# level no member the operation's shape lacks. Their JSON is written as it stands (`install`).
PLAIN_JSON_OPERATIONS = frozenset(
    {
        "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem",
        "TransactGetItems", "TransactWriteItems",
    }
)  # fmt: skip
plain_json = threading.local()  # `plain_json.off = True`: this thread's answers go through moto's serializer


@once
def install() -> None:
    from moto.core.responses import ActionResult
    from moto.dynamodb.responses import DynamoResult

    def wire(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: wire(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [wire(v) for v in value]
        if isinstance(value, bytes):
            return base64.b64encode(value).decode()
        return value

    def execute_result(self: Any, context: Any) -> Any:
        if (
            context.operation_model.name not in PLAIN_JSON_OPERATIONS
            or not isinstance(self.result, dict)
            or getattr(plain_json, "off", False)
        ):
            return ActionResult.execute_result(self, context)
        members = context.operation_model.output_shape.members
        answer = {k: v for k, v in wire(self.result).items() if k in members}
        content_type = "application/x-amz-json-" + context.service_model.metadata.get("jsonVersion", "1.0")
        return 200, {"Content-Type": content_type}, json.dumps(answer, separators=(",", ":"))

    replace(__name__, DynamoResult, "execute_result", execute_result)
