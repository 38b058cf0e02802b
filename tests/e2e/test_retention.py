"""Retention (docs/operate.md#data-retention), end to end on `nylorun serve` with the retention shrunk to
seconds: a task that ended expires with everything of it (history, journal, push config, dedupe records, file
versions), while an open task and a task that ended later stay, and the later task's versions of the same
output path stay too."""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from conftest import A2A, nylorun_serve, user_message
from nylorun_local.aws import free_port

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
RETENTION = 10  # seconds from a task's end to its expiry
TABLE, BUCKET = "nylorun-local-tasks", "nylorun-local-files"  # the local stack's names (prefix nylorun-local)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Any, Any]]:
    aws_port = free_port()
    env = {
        **os.environ,
        "NYLORUN_AGENTS": "retention_agent:agent",
        "PYTHONPATH": str(HERE),
        "NYLORUN_RETENTION_SECONDS": str(RETENTION),
        "NYLORUN_LOCAL_TTL_SECONDS": "1",  # the local TTL looks every second (DynamoDB's takes up to days)
        "NYLORUN_LOCAL_AWS_PORT": str(aws_port),
    }
    with nylorun_serve(["--auth", "none", "--no-examples"], "keeper/.well-known/agent-card.json", env=env) as base:
        aws = {"endpoint_url": f"http://127.0.0.1:{aws_port}", "region_name": "us-east-1",
               "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        yield f"{base}/keeper/", boto3.client("dynamodb", **aws), boto3.client("s3", **aws)


def call(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(url, json=body, headers=A2A, timeout=30)
    assert response.status_code == 200, response.text
    return dict(response.json())


def send(url: str, text: str, context_id: str, *parts: dict[str, Any]) -> dict[str, Any]:
    message = user_message(text, contextId=context_id)
    message["parts"] += list(parts)
    return dict(call(url, "SendMessage", {"message": message})["result"]["task"])


def items_of(db: Any, task_id: str) -> list[dict[str, Any]]:
    """Every table item that belongs to the task: in its partitions, or naming it (dedupe records)."""
    items = [i for page in db.get_paginator("scan").paginate(TableName=TABLE) for i in page["Items"]]
    return [i for i in items if task_id in i["PK"]["S"] or i.get("taskId", {}).get("S") == task_id]


def versions(s3: Any, prefix: str) -> list[str]:
    out = s3.list_object_versions(Bucket=BUCKET, Prefix=prefix)
    return sorted(v["VersionId"] for v in out.get("Versions", []) + out.get("DeleteMarkers", []))


def test_an_ended_task_expires_with_its_files_and_nothing_else_does(served: tuple[str, Any, Any]) -> None:
    url, db, s3 = served
    shared = f"ctx-{uuid.uuid4()}"
    pic = {"raw": base64.b64encode(b"caller's bytes").decode(), "mediaType": "application/octet-stream",
           "filename": "in.bin"}
    # Given a completed task with a caller's file, an output written twice and a push config
    ended = send(url, "go", shared, pic)
    assert ended["status"]["state"] == "TASK_STATE_COMPLETED", ended["status"]
    ended_at = time.time()
    created = call(url, "CreateTaskPushNotificationConfig", {"taskId": ended["id"], "id": "c1",
                                                             "url": "http://127.0.0.1:9/hook"})
    assert created["result"]["id"] == "c1", created
    download = ended["artifacts"][0]["parts"][0]["url"]
    assert httpx.get(download, timeout=10).status_code == 200
    inbound = [k["Key"] for k in s3.list_object_versions(Bucket=BUCKET, Prefix="inputs/").get("Versions", [])]
    outputs_prefix = "outputs/"
    assert len(versions(s3, outputs_prefix)) == 2 and len(inbound) == 1
    kinds = {i["SK"]["S"].split("#")[0] for i in items_of(db, ended["id"])}
    assert {"TASK", "MSG", "ART", "OP", "CFG", "MID"} <= kinds, kinds
    # And a task left open (waiting for an answer), and, later, another completed task in the same context
    waiting = send(url, "wait", f"ctx-{uuid.uuid4()}")
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", waiting["status"]
    time.sleep(max(0.0, ended_at + RETENTION / 2 - time.time()))
    later = send(url, "again", shared)
    assert later["status"]["state"] == "TASK_STATE_COMPLETED", later["status"]
    later_expires = time.time() + RETENTION
    assert len(versions(s3, outputs_prefix)) == 4

    # When the first task's retention passes and the local TTL has taken it
    deadline = ended_at + RETENTION + 15
    while items_of(db, ended["id"]) and time.time() < deadline:
        time.sleep(0.5)

    # Then it is gone for its caller, with everything of it: items, dedupe record, config, file versions
    gone = call(url, "GetTask", {"id": ended["id"]})
    assert gone.get("error", {}).get("code") == -32001, gone
    assert items_of(db, ended["id"]) == []
    assert versions(s3, inbound[0]) == []
    assert httpx.get(download, timeout=10).status_code == 404
    # And the later task is still there, with its two versions of the same path (only versions go, never a key)
    kept = call(url, "GetTask", {"id": later["id"]})["result"]
    assert time.time() < later_expires  # (the check ran before its own expiry)
    assert kept["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(versions(s3, outputs_prefix)) == 2
    assert httpx.get(kept["artifacts"][0]["parts"][0]["url"], timeout=10).status_code == 200
    # And the open task is untouched: still waiting, and none of its items carries an expiry
    still = call(url, "GetTask", {"id": waiting["id"]})["result"]
    assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert all("expiresAt" not in i for i in items_of(db, waiting["id"]))
