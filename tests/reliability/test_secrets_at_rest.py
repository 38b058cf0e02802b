"""Secrets at rest (docs/security.md): a push config's credentials and token, and the Step Functions callback token of a
turn waiting for a person, are stored sealed with the stack's KMS key (template.yaml StackKey). Read here the way
anyone with table or stream read access would: every item of the table, and every record of its change stream
(NEW_AND_OLD_IMAGES carries every attribute). None holds them in the clear; the Runtime still uses them (the
receiver gets its Authorization and token, the approval resumes the turn).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from nylorun.ports import TASK_TOKEN
from nylorun_local.runtime import LocalRuntime
from reliability_kit import INTERACTIONS, Receiver, auth, e2e_push, poll, rpc, user_message

pytestmark = pytest.mark.e2e


# The end-to-end push suite's fixtures: an Agent that asks for an approval on "ask", and a verifying receiver.
approver, receiver = e2e_push.approver, e2e_push.receiver


def table_dump(local_runtime: LocalRuntime) -> list[dict[str, Any]]:
    assert local_runtime.runtime is not None
    pages = local_runtime.aws.client("dynamodb").get_paginator("scan").paginate(
        TableName=local_runtime.runtime.settings.table_name
    )
    return [item for page in pages for item in page["Items"]]


def stream_dump(local_runtime: LocalRuntime) -> list[dict[str, Any]]:
    """Every record of the table's change stream, from its start."""
    streams = local_runtime.aws.client("dynamodbstreams")
    assert local_runtime.stack is not None
    arn = local_runtime.stack.table_stream_arn
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            out = streams.get_records(ShardIterator=iterator, Limit=1000)
            records += out["Records"]
            iterator = out.get("NextShardIterator") if out["Records"] else None
    return records


def test_push_credentials_and_callback_tokens_are_never_stored_in_the_clear(
    local_runtime: LocalRuntime, approver: str, receiver: Receiver
) -> None:
    # Given a turn registered for push with credentials and a token, waiting for an approval
    credentials, token = f"cred-{uuid.uuid4()}", f"tok-{uuid.uuid4()}"
    config = {"url": receiver.url, "authentication": {"scheme": "Bearer", "credentials": credentials}, "token": token}
    params = {"message": user_message("ask"), "configuration": {"taskPushNotificationConfig": config}}
    task = rpc(approver, "SendMessage", params, headers=auth(**{"A2A-Extensions": INTERACTIONS}))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    waits = poll(lambda: [i for i in table_dump(local_runtime) if i["PK"]["S"] == f"JRN#{task['id']}"
                          and i["SK"]["S"].startswith("WAIT#")], bool)
    assert waits, "the turn parked its callback token"
    stored_token = waits[0]["token"]["S"]
    assert local_runtime.runtime is not None
    sealer = local_runtime.runtime.sealer  # what the api function opens it with
    callback_token = sealer.open(stored_token, TASK_TOKEN, task["id"]) if sealer else stored_token
    # When the table and its whole change stream are read
    table, stream = json.dumps(table_dump(local_runtime)), json.dumps(stream_dump(local_runtime), default=str)
    # Then neither holds the credentials, the token or the callback token; the stored ones are KMS ciphertext
    for secret in (credentials, token, callback_token):
        assert secret not in table and secret not in stream
    assert stored_token.startswith("nylorun-kms:v1:") and callback_token != stored_token
    # And the Runtime still uses them: the approval (its callback token) resumes the turn, and the receiver gets
    # its Authorization and token on every delivery
    iid = task["status"]["message"]["metadata"][INTERACTIONS]["interactionId"]
    answer = user_message("ok", taskId=task["id"], extensions=[INTERACTIONS],
                          metadata={INTERACTIONS: {"interactionId": iid, "approved": True}})
    rpc(approver, "SendMessage", {"message": answer})
    requests = poll(lambda: list(receiver.requests), lambda r: any(
        "statusUpdate" in x["body"] and x["body"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED" for x in r
    ))
    assert {r["headers"]["Authorization"] for r in requests} == {f"Bearer {credentials}"}
    assert {r["headers"]["X-A2A-Notification-Token"] for r in requests} == {token}
