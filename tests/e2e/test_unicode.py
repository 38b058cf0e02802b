"""End to end, raw HTTP: text is well-formed Unicode or refused, and an Agent's ill-formed text is repaired.

A JSON string escape such as `\\ud800` with no partner (what a JavaScript client sends after cutting a
string inside an emoji) decodes to a Python str holding a lone surrogate. Stored, it made every later read
of the task fail (-32603) and blocked its context for good. The rule: a lone surrogate anywhere in a
request's params, in a string value or an object key, is -32602 naming where it is, and changes nothing; a
properly paired escape (`\\ud83d\\ude00` = 😀) is a character like any other. An Agent's own output with a
lone surrogate is recorded with U+FFFD in its place.

Bodies are posted as JSON text (json.dumps escapes a lone surrogate as `\\ud800`): httpx's `json=` cannot
encode one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from conftest import user_message
from nylorun.engine import Agent, Skill, Turn
from nylorun_local.runtime import LocalRuntime
from table_scope import TableScan, settled, snapshot
from test_bad_input import assert_error, assert_no_internals, envelope, post, violated_fields

pytestmark = pytest.mark.e2e

ASKS = "unicode-asks"  # echoes, or asks a question when the text is "ask"
WRITES = "unicode-writes"  # writes lone surrogates into everything a turn shows
AGENTS = ("echo", ASKS, WRITES)
LONE = "\ud800"
DESCRIPTION = "not well-formed Unicode"


def call(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC call whose body is JSON text with escapes: it may carry lone surrogates."""
    response = post(url, json.dumps(envelope(method, params)))
    assert response.status_code == 200, response.text
    assert_no_internals(response.text)
    return dict(response.json())


def result(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = call(url, method, params)
    assert "result" in answer, answer
    return dict(answer["result"])


@pytest.fixture(scope="module")
def served(local_runtime: LocalRuntime) -> None:
    def asks(turn: Turn) -> None:
        if turn.text == "ask":
            turn.reply(f"answered {turn.question('Which one?')}")
        else:
            turn.reply(turn.text)

    def writes(turn: Turn) -> None:
        turn.plan(f"Look{LONE}", "Approve", "Done")
        turn.mark(0, "done", note=f"note {LONE}")
        turn.say(f"step {LONE} text")
        turn.artifact(f"art {LONE}", name=f"name{LONE}", metadata={f"k{LONE}": [f"v{LONE}"]})
        if turn.approval(f"Approve {LONE}?", {f"key{LONE}": f"value{LONE}"}):
            # An emoji as two Python code points (a pair, but not one character yet), and a lone low one.
            turn.reply(f"a{LONE}b \ud83d\ude00 \udc00")

    skill = [Skill(id="u", name="u", description="unicode tests", tags=["test"])]
    for name, fn in ((ASKS, asks), (WRITES, writes)):
        agent = Agent(name=name, description=f"test agent {name}", skills=skill)
        agent.turn(fn)
        local_runtime.add_agent(agent)


@pytest.fixture(scope="module")
def context(served: None, local_runtime: LocalRuntime) -> dict[str, Any]:
    """Alice's context at `unicode-asks`: a completed task, then one waiting for an answer (INPUT_REQUIRED)."""
    url = local_runtime.agent_url(ASKS)
    done = result(url, "SendMessage", {"message": user_message("first 😀")})["task"]
    waiting = result(url, "SendMessage", {"message": user_message("ask", contextId=done["contextId"])})[
        "task"
    ]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", waiting
    return {"url": url, "contextId": done["contextId"], "done": done["id"], "waiting": waiting["id"]}


def message(**fields: Any) -> dict[str, Any]:
    return user_message(f"unicode {uuid.uuid4()}", **fields)


# Where a lone surrogate can hide in a SendMessage, and the field the error must name.
BAD_SENDS = [
    pytest.param({"message": message(parts=[{"text": f"a{LONE}b"}])}, "message.parts[0].text", id="text"),
    pytest.param(
        {"message": message(metadata={"note": f"x{LONE}"})}, "message.metadata.note", id="metadata-value"
    ),
    pytest.param(
        {"message": message(metadata={"ok": {f"k{LONE}": 1}})},
        "message.metadata.ok.k\\ud800",
        id="metadata-key",
    ),
    pytest.param({"message": message(messageId=f"m-{LONE}")}, "message.messageId", id="message-id"),
    pytest.param(
        {
            "message": message(),
            "configuration": {"taskPushNotificationConfig": {"url": f"http://127.0.0.1:9/hook{LONE}"}},
        },
        "configuration.taskPushNotificationConfig.url",
        id="push-url",
    ),
    pytest.param(
        {"message": message(parts=[{"data": {"list": ["fine", f"\udc00{LONE}"]}}])},
        "message.parts[0].data.list[1]",
        id="data-part",
    ),
    pytest.param(
        {"message": message(parts=[{"text": "t", "metadata": {"a": f"{LONE}"}}])},
        "message.parts[0].metadata.a",
        id="part-metadata",
    ),
    pytest.param(
        {"message": message(extensions=[f"urn:x:{LONE}"])}, "message.extensions[0]", id="extension-uri"
    ),
    pytest.param(
        {"message": message(), "metadata": {"who": f"{LONE}"}}, "metadata.who", id="request-metadata"
    ),
    # The two halves of 😀 in the wrong order are two lone surrogates.
    pytest.param(
        {"message": message(parts=[{"text": "\ude00\ud83d"}])}, "message.parts[0].text", id="reversed-pair"
    ),
]


@pytest.mark.parametrize("into", ["new-turn", "reply-to-waiting-task"])
@pytest.mark.parametrize(("params", "field"), BAD_SENDS)
def test_a_lone_surrogate_is_invalid_params_naming_the_field_and_changes_nothing(
    context: dict[str, Any], table_items: TableScan, params: dict[str, Any], field: str, into: str
) -> None:
    # Given: the message goes into alice's context, as a new turn or as the answer to its open question
    target = {"contextId": context["contextId"]}
    if into == "reply-to-waiting-task":
        target["taskId"] = context["waiting"]
    params = {**params, "message": {**params["message"], **target}}
    before = settled(table_items, AGENTS)
    # When
    response = post(context["url"], json.dumps(envelope("SendMessage", params)))
    # Then: -32602, HTTP 200, the field named, no stack trace, nothing written
    error = assert_error(response, -32602, request_id="req-1")
    assert field in violated_fields(error), error
    assert DESCRIPTION in json.dumps(error["data"])
    assert snapshot(table_items, AGENTS) == before
    # And the caller's other tasks in that context still read, list and answer
    assert_context_serves(context)


def assert_context_serves(context: dict[str, Any]) -> None:
    url = context["url"]
    done = result(url, "GetTask", {"id": context["done"], "historyLength": 10})
    assert done["history"][0]["parts"] == [{"text": "first 😀"}]
    assert (
        result(url, "GetTask", {"id": context["waiting"]})["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    )
    listed = result(url, "ListTasks", {"contextId": context["contextId"], "historyLength": 10})
    assert {t["id"] for t in listed["tasks"]} == {context["done"], context["waiting"]}


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        pytest.param("GetTask", {"id": f"t{LONE}"}, "id", id="get-task"),
        pytest.param("CancelTask", {"id": "t", "metadata": {f"{LONE}": 1}}, "metadata.\\ud800", id="cancel"),
        pytest.param(
            "ListTasks", {"contextId": f"c{LONE}", "historyLength": 3}, "contextId", id="list-tasks"
        ),
        pytest.param(
            "CreateTaskPushNotificationConfig",
            {"taskId": "t", "url": f"https://example.com/{LONE}"},
            "url",
            id="create-push-config",
        ),
        pytest.param(
            "GetTaskPushNotificationConfig", {"taskId": "t", "id": f"{LONE}"}, "id", id="get-push-config"
        ),
        pytest.param(
            "SendStreamingMessage", {"message": message(messageId=LONE)}, "message.messageId", id="stream"
        ),
    ],
)
def test_every_method_refuses_a_lone_surrogate_in_its_params(
    context: dict[str, Any], table_items: TableScan, method: str, params: dict[str, Any], field: str
) -> None:
    # Given
    if "taskId" in params:
        params = {**params, "taskId": context["waiting"]}
    before = settled(table_items, AGENTS)
    # When
    response = post(context["url"], json.dumps(envelope(method, params)))
    # Then
    error = assert_error(response, -32602, request_id="req-1")
    assert field in violated_fields(error), error
    assert snapshot(table_items, AGENTS) == before


def test_a_paired_surrogate_escape_is_a_character_and_round_trips(context: dict[str, Any]) -> None:
    # Given: 😀 written as the escaped pair \ud83d\ude00 (json.dumps escapes it that way), in text and keys
    params = {"message": message(parts=[{"text": "smile 😀 \U0010ffff"}], metadata={"😀": "😀"})}
    assert "\\ud83d\\ude00" in json.dumps(params)
    # When
    task = result(context["url"], "SendMessage", {**params, "configuration": {"returnImmediately": True}})[
        "task"
    ]
    got = result(context["url"], "GetTask", {"id": task["id"], "historyLength": 10})
    # Then
    sent = got["history"][0]
    assert sent["parts"] == [{"text": "smile 😀 \U0010ffff"}]
    assert sent["metadata"] == {"😀": "😀"}


def test_the_context_still_cancels_after_the_bad_input(context: dict[str, Any]) -> None:
    # When alice cancels the task that waited through every bad reply above
    canceled = result(context["url"], "CancelTask", {"id": context["waiting"]})
    # Then
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    listed = result(context["url"], "ListTasks", {"contextId": context["contextId"], "historyLength": 10})
    assert len(listed["tasks"]) == 2


def test_an_agents_lone_surrogates_are_recorded_as_replacement_characters(
    served: None, agent_url: Callable[[str], str]
) -> None:
    # Given an agent whose plan, step text, artifact, approval and reply all carry lone surrogates
    url = agent_url(WRITES)
    extensions = "https://docs.nylorun.com/a2a/interactions/v1, https://docs.nylorun.com/a2a/progress/v1"

    def read(task_id: str) -> dict[str, Any]:
        response = post(
            url,
            json.dumps(envelope("GetTask", {"id": task_id})),
            headers={"A2A-Version": "1.0", "Authorization": "Bearer tok-alice", "A2A-Extensions": extensions},
        )
        answer = response.json()
        assert "result" in answer, answer
        return dict(answer["result"])

    # When it asks for the approval
    task = result(url, "SendMessage", {"message": message()})["task"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED", task
    waiting = read(task["id"])
    # Then the task reads, with U+FFFD where each lone surrogate was
    status = waiting["status"]["message"]
    interaction = status["metadata"]["https://docs.nylorun.com/a2a/interactions/v1"]
    assert interaction["prompt"] == "Approve \ufffd?"
    assert interaction["detail"] == {"key\ufffd": "value\ufffd"}
    steps = status["metadata"]["https://docs.nylorun.com/a2a/progress/v1"]["steps"]
    assert steps[0] == {"label": "Look\ufffd", "state": "done", "note": "note \ufffd"}
    artifact = waiting["artifacts"][0]
    assert artifact["name"] == "name\ufffd"
    assert artifact["parts"] == [{"text": "art \ufffd"}]
    assert artifact["metadata"] == {"k\ufffd": ["v\ufffd"]}
    # When the approval is given
    answer = {
        "messageId": f"m-{uuid.uuid4()}",
        "taskId": task["id"],
        "role": "ROLE_USER",
        "parts": [{"text": "ok"}],
        "extensions": ["https://docs.nylorun.com/a2a/interactions/v1"],
        "metadata": {
            "https://docs.nylorun.com/a2a/interactions/v1": {
                "interactionId": interaction["interactionId"],
                "approved": True,
            }
        },
    }
    done = result(url, "SendMessage", {"message": answer})["task"]
    # Then the reply is recorded well-formed: the Python pair joined into 😀, the lone halves replaced
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert done["status"]["message"]["parts"] == [{"text": "a\ufffdb 😀 \ufffd"}]
    # And every read of the task and its context works
    assert read(task["id"])["history"][-1]["parts"] == [{"text": "a\ufffdb 😀 \ufffd"}]
    listed = result(url, "ListTasks", {"contextId": task["contextId"], "historyLength": 10})
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]
