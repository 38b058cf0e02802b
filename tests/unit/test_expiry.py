"""Retention (docs/operate.md#data-retention): which stream records are a task's expiry, and which file
versions an expired task takes with it. The whole flow, on the local Runtime, is
tests/e2e/test_retention.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from nylorun.adapters.dynamodb import decode_expiry
from nylorun.domain.files import scope
from nylorun.engine.files import FileService, ref
from nylorun.engine.replay import opaque_id
from nylorun.ports import ExpiredTask, JournalEntry, Owner, StoredObject, TaskRemains
from nylorun.protocol.models import Artifact, Message, Part, Role
from nylorun.settings import Settings

SAMPLE = json.loads((Path(__file__).parents[2] / "events" / "sweep-ttl-removal.json").read_text())["Records"][0]
OWNER = Owner(subject="user-sample-0001", agent="echo")


def record(edit: Any = None) -> dict[str, Any]:
    changed = copy.deepcopy(SAMPLE)
    if edit is not None:
        edit(changed)
    return changed


def test_the_ttl_removal_of_an_expired_task_is_its_expiry() -> None:
    # When the sample (DynamoDB's TTL removing an expired task item) is decoded
    expired = decode_expiry(record())
    # Then it names the task, its owner and its context, from the old image
    assert expired == ExpiredTask(
        task_id="00000000-0000-5000-8000-000000000000", owner=OWNER, context_id="00000000-0000-4000-8000-00000000c0de"
    )


NOT_AN_EXPIRY = {
    "a change, not a removal": lambda r: r.update(eventName="MODIFY"),
    "the removal of an artifact": lambda r: r["dynamodb"]["OldImage"].update(SK={"S": "ART#a1"}),
    "a task that never ended (no expiresAt)": lambda r: r["dynamodb"]["OldImage"].pop("expiresAt"),
    "a task removed before its expiry": lambda r: r["dynamodb"].update(ApproximateCreationDateTime=1803816000),
    # An item the Runtime did not write (every task item names its task, owner and context): a record that raised
    # here would be retried for good and hold up the stream behind it (CI met one, from a test's bare item).
    "an expired TASK item that is not a task": lambda r: r["dynamodb"]["OldImage"].pop("taskId"),
}


@pytest.mark.parametrize("case", list(NOT_AN_EXPIRY))
def test_other_records_are_no_expiry(case: str) -> None:
    # Given a stream record that is not an expired task's removal
    # When decoded
    # Then it is none: nothing of any task is removed for it
    assert decode_expiry(record(NOT_AN_EXPIRY[case])) is None


class Bucket:
    """The FileStore port in memory: versions by (key, version id)."""

    def __init__(self) -> None:
        self.versions: set[tuple[str, str]] = set()

    def put(self, key: str, data: bytes, media_type: str) -> StoredObject:
        stored = StoredObject(key=key, version_id=f"v{len(self.versions) + 1}", size=len(data), sha256="")
        self.versions.add((key, stored.version_id))
        return stored

    def get(self, key: str, version_id: str) -> bytes:
        return b""

    def presign(self, key: str, version_id: str, expires_seconds: int, filename: str | None = None) -> str:
        return ""

    def mark_refused(self, key: str, version_id: str) -> None:
        pass

    def delete_versions(self, versions: Any) -> None:
        self.versions -= set(versions)


def test_an_expired_task_takes_the_versions_it_named_and_no_other() -> None:
    # Given a bucket holding a caller's file, two versions of an output the task wrote, a fetched url file, and
    # a later task's version of the same output path
    bucket = Bucket()
    files = FileService(bucket, Settings())
    inbound = bucket.put("inputs/s/echo/c/m1/1-in.bin", b"in", "application/octet-stream")
    draft = bucket.put("outputs/s/echo/c/out/report.txt", b"draft", "text/plain")
    final = bucket.put("outputs/s/echo/c/out/report.txt", b"final", "text/plain")
    fetched = bucket.put("inputs/s/echo/c/m1/2-data.bin", b"url", "application/octet-stream")
    later = bucket.put("outputs/s/echo/c/out/report.txt", b"later", "text/plain")
    written = {"key": draft.key, "versionId": draft.version_id}
    remains = TaskRemains(
        history=[Message(message_id="m1", role=Role.USER, parts=[Part(text="hi"), Part(url=ref(inbound))])],
        artifacts=[Artifact(artifact_id="a1", parts=[Part(url=ref(final))])],
        journal={
            1: JournalEntry(seq=1, kind="effect", name="files.fetch.2", finished=True,
                            result={"key": fetched.key, "versionId": fetched.version_id}),
            2: JournalEntry(seq=2, kind="effect", name="files.write.out/report.txt", finished=True, result=written),
            3: JournalEntry(seq=3, kind="effect", name="files.write.out/report.txt", finished=True,
                            result={"key": final.key, "versionId": final.version_id}),
            4: JournalEntry(seq=4, kind="effect", name="charge", finished=True, result={"key": later.key}),
        },
    )
    # When the task's files are forgotten
    writes = files.forget("t1", OWNER, "c", remains)
    # Then only the later task's version is left, and both writes' version records can go
    assert bucket.versions == {(later.key, later.version_id)}
    assert writes == [(scope(OWNER, "c"), opaque_id("t1", 2, "eff")), (scope(OWNER, "c"), opaque_id("t1", 3, "eff"))]
