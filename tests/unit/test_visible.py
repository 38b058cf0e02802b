"""`visible`: the one function that decides what a caller sees of profile extension data (Profile v2: only
for those who activate it), at every level of a task, a message and a push body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from nylorun.profile.extensions import (
    EFFECTS,
    FILES,
    INTERACTIONS,
    PROFILE_EXTENSIONS,
    PROGRESS,
    TELEMETRY,
    visible,
)
from nylorun.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    Wire,
)

OTHER = "https://example.com/ext/other/v1"  # not a profile extension: always shown
FILE = {"kind": "receipt", "version": 1, "size": 3, "sha256": "ab", "path": "r.txt"}


def agent_message(**metadata: Any) -> Message:
    return Message(message_id="a1", role=Role.AGENT, parts=[Part(text="Approve?")], metadata=metadata,
                   extensions=list(metadata))


def file_part(note: str) -> Part:
    return Part(url="https://files/x", metadata={FILES: FILE, "note": note})


STATUS = TaskStatus(
    state=TaskState.AUTH_REQUIRED,
    message=agent_message(**{INTERACTIONS: {"interactionId": "ia-1"}, PROGRESS: {"steps": []},
                             TELEMETRY: {"steps": 1}, EFFECTS: {"uncertain": "eff-1"}, OTHER: {"x": 1}}),
)
RECEIPT = Artifact(artifact_id="r", parts=[file_part("agent")], metadata={FILES: FILE}, extensions=[FILES])
ANSWER = Message(message_id="u1", role=Role.USER, parts=[Part(text="ok"), file_part("mine")],
                 metadata={INTERACTIONS: {"interactionId": "ia-0", "approved": True}, "mine": 1},
                 extensions=[INTERACTIONS])
TASK = Task(id="t", context_id="c", status=STATUS, history=[ANSWER, STATUS.message], artifacts=[RECEIPT],
            metadata={"mine": {"kept": True}})
PUSHES = [
    StreamResponse(status_update=TaskStatusUpdateEvent(task_id="t", context_id="c", status=STATUS)),
    StreamResponse(artifact_update=TaskArtifactUpdateEvent(task_id="t", context_id="c", artifact=RECEIPT)),
]


def shown(obj: Wire) -> set[str]:
    """The profile URIs anywhere in the wire form: a key or a string equal to one is `"<uri>"` in JSON."""
    text = json.dumps(obj.wire())
    return {uri for uri in PROFILE_EXTENSIONS if f'"{uri}"' in text}


@pytest.mark.parametrize("obj", [TASK, STATUS.message, *PUSHES], ids=["task", "message", "status", "artifact"])
def test_the_core_tier_sees_no_profile_uri_and_keeps_its_own_metadata(obj: Wire) -> None:
    before = obj.wire()
    seen = visible(obj, [])
    assert shown(seen) == set()
    text = json.dumps(seen.wire())
    assert OTHER in text or '"note"' in text  # other extensions and the caller's own metadata stay
    assert obj.wire() == before  # what was stored is not changed


def test_a_task_keeps_caller_metadata_at_every_level() -> None:
    seen = visible(TASK, []).wire()
    assert seen["metadata"] == {"mine": {"kept": True}}
    assert seen["history"][0]["metadata"] == {"mine": 1}
    assert "extensions" not in seen["history"][0]  # its only extension was hidden: no empty list
    assert seen["history"][0]["parts"][1]["metadata"] == {"note": "mine"}
    assert seen["status"]["message"]["metadata"] == {OTHER: {"x": 1}}
    assert seen["status"]["message"]["extensions"] == [OTHER]
    assert "metadata" not in seen["artifacts"][0] and "extensions" not in seen["artifacts"][0]
    assert seen["artifacts"][0]["parts"][0]["metadata"] == {"note": "agent"}


@pytest.mark.parametrize("uri", list(PROFILE_EXTENSIONS))
def test_one_activated_extension_is_all_that_shows(uri: str) -> None:
    for obj in (TASK, *PUSHES):
        assert shown(visible(obj, [uri])) == shown(obj) & {uri}
    assert shown(visible(TASK, [uri])) == {uri}


def test_files_v1_shows_on_the_parts_when_activated() -> None:
    seen = visible(TASK, [FILES]).wire()
    assert seen["artifacts"][0]["parts"][0]["metadata"] == {FILES: FILE, "note": "agent"}
    assert seen["history"][0]["parts"][1]["metadata"] == {FILES: FILE, "note": "mine"}
    assert seen["status"]["message"]["extensions"] == [OTHER]


def test_with_everything_activated_the_object_is_unchanged() -> None:
    assert visible(TASK, PROFILE_EXTENSIONS) is TASK


def test_what_hides_nothing_is_handed_on_as_stored_not_copied() -> None:
    # Given a task whose caller message and artifact carry no profile data, and whose agent reply does
    plain = Message(message_id="u2", role=Role.USER, parts=[Part(text="hi", metadata={"mine": 1})])
    notes = Artifact(artifact_id="n", parts=[Part(text="notes")], metadata={OTHER: {"x": 1}}, extensions=[OTHER])
    task = Task(id="t", context_id="c", status=STATUS, history=[plain, STATUS.message], artifacts=[notes])

    # When a core-tier caller reads it
    seen = visible(task, [])

    # Then only the reply is rendered anew: the parts with nothing to hide are the stored ones (a GetTask copies
    # no more than it must), and the reply's profile data is still gone
    assert seen.history is not None and seen.artifacts is not None
    assert seen.history[0] is plain and seen.artifacts[0] is notes
    assert seen.history[1] is not STATUS.message and shown(seen) == set()
