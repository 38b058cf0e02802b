"""Trust (docs/security.md), tried as an adversarial caller would on the local Runtime: each test is an attack that
worked before the change and is refused now.

- A refused request leaves no file that outlives it: the files of a reply refused by a pure check are never stored;
  those of a request refused by the write itself (a busy context) carry the tag the bucket's lifecycle expires.
- A subject is nowhere as an unsalted sha256 (page tokens, S3 keys in presigned URLs), and page tokens cannot be
  made up.
- A web page's script cannot drive the Runtime (browser `Origin`), and `--auth none` stays on loopback unless asked.
- A caller cannot reach the metadata service or a private network through an IPv6 address that carries an IPv4 one,
  as a push URL or as a file the Runtime fetches.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi.testclient import TestClient
from nylorun.engine.agent import Agent, Skill
from nylorun.engine.turn import Turn
from nylorun.wiring import Runtime
from nylorun_local.aws import free_port
from nylorun_local.runtime import LocalOptions, LocalRuntime
from reliability_kit import ALICE, INTERACTIONS, auth, error_code, rpc, user_message

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
PNG = base64.b64encode(b"\x89PNG refused bytes").decode()


def _png(message: dict[str, Any], name: str = "pic.png") -> dict[str, Any]:
    return {**message, "parts": [*message["parts"], {"raw": PNG, "mediaType": "image/png", "filename": name}]}


@pytest.fixture(scope="module")
def trust_agent(local_runtime: LocalRuntime) -> Iterator[dict[str, threading.Event]]:
    """`t-trust`: takes images; "wait" holds its context until the context's gate opens, "ask" waits for an
    approval."""
    gates: dict[str, threading.Event] = {}
    agent = Agent(
        name="t-trust",
        description="holds its context, or asks",
        skills=[Skill(id="t", name="t", description="t", tags=["trust"])],
        input_modes=["text/plain", "image/*"],
    )

    @agent.turn
    def run(turn: Turn) -> None:
        text = turn.message.text()
        if text == "wait":
            gates[turn.context_id].wait(20)
        elif text == "ask":
            turn.approval("Proceed?")
        turn.reply("done")

    local_runtime.add_agent(agent)
    yield gates
    for gate in gates.values():
        gate.set()


def _input_versions(local_runtime: LocalRuntime, message_id: str) -> list[dict[str, Any]]:
    """Every stored version of the caller's files of one message, with its tags."""
    assert local_runtime.stack is not None
    s3, bucket = local_runtime.aws.client("s3"), local_runtime.stack.files_bucket
    versions = s3.list_object_versions(Bucket=bucket, Prefix="inputs/").get("Versions", [])
    mine = [v for v in versions if f"/{message_id}/" in v["Key"]]
    for version in mine:
        tags = s3.get_object_tagging(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])["TagSet"]
        version["Tags"] = {t["Key"]: t["Value"] for t in tags}
    return mine


def _expired_by_lifecycle(key: str, tags: dict[str, str]) -> list[dict[str, Any]]:
    """The template's lifecycle rules that expire this object's current version, and its data after that."""
    rules = yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)["Resources"]["FilesBucket"]["Properties"][
        "LifecycleConfiguration"]["Rules"]
    return [
        rule for rule in rules
        if rule["Status"] == "Enabled"
        and key.startswith(rule.get("Prefix", ""))
        and all(tags.get(f["Key"]) == f["Value"] for f in rule.get("TagFilters", []))
        and rule.get("ExpirationInDays") and rule.get("NoncurrentVersionExpiration")
    ]


class _CfnLoader(yaml.SafeLoader):
    """template.yaml with its short-form intrinsics (!Ref, !Sub, …) read as plain values."""


_CfnLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def test_files_of_a_request_refused_by_a_busy_context_expire(
    local_runtime: LocalRuntime, trust_agent: dict[str, threading.Event]
) -> None:
    url = local_runtime.agent_url("t-trust")
    # Given a context busy with a turn that holds it
    context_id = f"ctx-{uuid.uuid4()}"
    trust_agent[context_id] = threading.Event()
    rpc(url, "SendMessage", {"message": user_message("wait", contextId=context_id),
                             "configuration": {"returnImmediately": True}})
    # When a caller sends a file to that context with delivery "reject" (refused only by the write that finds it busy)
    message = _png(user_message("look", contextId=context_id, metadata={"delivery": "reject"}))
    answer = rpc(url, "SendMessage", {"message": message})
    # Then the request is refused
    assert error_code(answer) == -32004, answer
    # And the file it stored carries the tag the bucket's lifecycle expires, current version and data alike
    versions = _input_versions(local_runtime, message["messageId"])
    assert versions, "the file was stored before the busy check"
    for version in versions:
        assert _expired_by_lifecycle(version["Key"], version["Tags"]), version
    trust_agent[context_id].set()


def test_an_accepted_files_are_kept(local_runtime: LocalRuntime, trust_agent: dict[str, threading.Event]) -> None:
    # Given a free context; When a file arrives with an accepted message
    message = _png(user_message("look"))
    answer = rpc(local_runtime.agent_url("t-trust"), "SendMessage", {"message": message})
    assert "task" in answer["result"], answer
    # Then its file is stored and nothing expires it
    versions = _input_versions(local_runtime, message["messageId"])
    assert len(versions) == 1 and not _expired_by_lifecycle(versions[0]["Key"], versions[0]["Tags"])


def test_a_reply_refused_by_its_answer_stores_no_file(local_runtime: LocalRuntime, trust_agent: dict[str, threading.Event]) -> None:
    url = local_runtime.agent_url("t-trust")
    # Given a task waiting for an approval
    task = rpc(url, "SendMessage", {"message": user_message("ask")})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED", task  # Profile v2: approvals
    # When a reply carries a file and an answer to an interaction that is not the open one
    wrong = {INTERACTIONS: {"interactionId": "not-the-open-one", "approved": True}}
    reply = _png(user_message("yes", taskId=task["id"], metadata=wrong, extensions=[INTERACTIONS]))
    answer = rpc(url, "SendMessage", {"message": reply})
    # Then it is refused, and its file was never stored
    assert error_code(answer) == -32602, answer
    assert _input_versions(local_runtime, reply["messageId"]) == []


def test_no_page_token_or_file_url_carries_the_subjects_plain_digest(
    local_runtime: LocalRuntime, trust_agent: dict[str, threading.Event]
) -> None:
    url = local_runtime.agent_url("t-trust")
    # Given alice's tasks, one with a file (its download URL names its S3 key)
    sent = rpc(url, "SendMessage", {"message": _png(user_message("look"))})["result"]["task"]
    rpc(url, "SendMessage", {"message": user_message("again")})
    # When alice lists them a page at a time and reads the task with the file
    page = rpc(url, "ListTasks", {"pageSize": 1})["result"]
    token = page["nextPageToken"]
    file_url = next(p["url"] for p in rpc(url, "GetTask", {"id": sent["id"]})["result"]["history"][0]["parts"]
                    if "url" in p)
    # Then neither holds sha256("alice"), which anyone can compute from a list of candidate subjects
    plain = hashlib.sha256(b"alice").hexdigest()[:32]
    decoded = base64.urlsafe_b64decode(token.split(".")[0] + "==").decode(errors="replace")
    assert plain not in decoded and plain not in token
    assert plain not in file_url


def test_a_made_up_page_token_is_refused(local_runtime: LocalRuntime, trust_agent: dict[str, threading.Event]) -> None:
    url = local_runtime.agent_url("t-trust")
    for text in ("one", "two"):
        rpc(url, "SendMessage", {"message": user_message(text)})
    token = rpc(url, "ListTasks", {"pageSize": 1})["result"]["nextPageToken"]
    # When a caller hands back a token it made itself from what it read in one (the body, without the Runtime's MAC)
    body = token.split(".")[0]
    answer = rpc(url, "ListTasks", {"pageSize": 1, "pageToken": body})
    # Then it is not a token this Runtime issued
    assert error_code(answer) == -32602, answer


def test_a_web_pages_request_is_refused_unless_its_origin_is_allowed(local_runtime: LocalRuntime) -> None:
    url = local_runtime.agent_url("echo")
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": user_message("hi")}}
    # Given a page at evil.example whose script reaches the Runtime (DNS rebinding makes it "same-origin", so the
    # JSON content type needs no preflight)
    # When it posts
    refused = httpx.post(url, json=body, headers=auth(ALICE, Origin="http://evil.example"), timeout=30)
    # Then the Runtime refuses it before reading anything; a caller that is not a browser sends no Origin
    assert refused.status_code == 403, refused.text
    assert httpx.post(url, json=body, headers=auth(ALICE), timeout=30).status_code == 200


def test_an_allowed_origin_may_call(local_runtime: LocalRuntime) -> None:
    # Given the Runtime's app with --allow-origin https://app.example (NYLORUN_ALLOWED_ORIGINS), over the same stack
    running = local_runtime.runtime
    assert running is not None
    settings = running.settings.model_copy(update={"allowed_origins": ["https://app.example"]})
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": user_message("hi"), "configuration": {"returnImmediately": True}}}
    with TestClient(Runtime(settings=settings, registry=running.registry).app()) as client:
        # When that page and another post
        ok = client.post("/v1/a2a/agents/echo", json=body, headers=auth(ALICE, Origin="https://app.example"))
        other = client.post("/v1/a2a/agents/echo", json=body, headers=auth(ALICE, Origin="https://evil.example"))
    # Then only the allowed page's request is served
    assert (ok.status_code, other.status_code) == (200, 403)
    assert "task" in ok.json()["result"], ok.text


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10"])
def test_auth_none_off_loopback_needs_its_own_flag(host: str) -> None:
    # When someone starts a local Runtime with --auth none on an address others can reach
    # Then it refuses, saying what to do
    with pytest.raises(ValueError, match="--allow-remote-without-auth"):
        LocalRuntime(LocalOptions(host=host, port=0, auth="none"))
    # And with the flag it is the user's choice (the options are accepted)
    assert LocalRuntime(LocalOptions(host=host, port=0, auth="none", allow_remote_without_auth=True, push=False))


def test_nylorun_serve_refuses_auth_none_off_loopback() -> None:
    # When the command itself is run that way
    command = [sys.executable, "-m", "nylorun_client.command", "serve", "--auth", "none", "--host", "0.0.0.0",
               "--port", str(free_port())]
    try:
        ran = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("nylorun serve --auth none --host 0.0.0.0 started serving")
    # Then it exits 2 with the reason, having served nothing
    assert ran.returncode == 2 and "--allow-remote-without-auth" in ran.stderr, ran.stderr[-2000:]


def test_a_made_up_push_config_page_token_is_refused(local_runtime: LocalRuntime) -> None:
    url = local_runtime.agent_url("echo")
    # Given two of alice's tasks, one with three push configs
    tasks = [rpc(url, "SendMessage", {"message": user_message(t)})["result"]["task"]["id"] for t in ("a", "b")]
    for n in range(3):
        rpc(url, "CreateTaskPushNotificationConfig", {"taskId": tasks[0], "url": f"https://hooks.example.com/{n}"})
    token = rpc(url, "ListTaskPushNotificationConfigs", {"taskId": tasks[0], "pageSize": 1})["result"]["nextPageToken"]
    # When a caller makes one up (what a token used to be: base64 of "o:<offset>"), or moves one to another task
    made_up = base64.urlsafe_b64encode(b"o:1").decode().rstrip("=")
    answers = [
        rpc(url, "ListTaskPushNotificationConfigs", {"taskId": task, "pageSize": 1, "pageToken": bad})
        for task, bad in ((tasks[0], made_up), (tasks[0], "1"), (tasks[1], token))
    ]
    # Then each is refused; the token the Runtime issued still pages its own task
    assert [error_code(a) for a in answers] == [-32602] * 3, answers
    following = rpc(url, "ListTaskPushNotificationConfigs", {"taskId": tasks[0], "pageSize": 1, "pageToken": token})
    assert len(following["result"]["configs"]) == 1, following


# 169.254.169.254 (the instance metadata service) inside each IPv6 form that carries an IPv4 address. Before
# decision 0011 only the IPv4-mapped form (::ffff:0:0/96) was unwrapped; these four were judged as public IPv6
# addresses (docs/decisions/0011-ssrf-ipv4-in-ipv6.md).
METADATA_IN_IPV6 = [
    pytest.param("64:ff9b::a9fe:a9fe", id="NAT64 64:ff9b::/96"),
    pytest.param("64:ff9b:1::a9fe:a9fe", id="local-use NAT64 64:ff9b:1::/48"),
    pytest.param("2002:a9fe:a9fe::1", id="6to4 2002::/16"),
    pytest.param("::a9fe:a9fe", id="IPv4-compatible ::/96"),
]


def _tasks_in(url: str, context_id: str) -> list[dict[str, Any]]:
    return list(rpc(url, "ListTasks", {"contextId": context_id})["result"]["tasks"])


@pytest.mark.parametrize("address", METADATA_IN_IPV6)
def test_a_push_url_that_wraps_the_metadata_address_in_ipv6_is_refused(local_runtime: LocalRuntime, address: str) -> None:
    url = local_runtime.agent_url("echo")
    context_id = f"ctx-{uuid.uuid4()}"
    # Given a caller whose push config names the metadata service, wrapped in an IPv6 address
    config = {"id": "metadata", "url": f"https://[{address}]/latest/meta-data/"}
    params = {"message": user_message("hi", contextId=context_id),
              "configuration": {"taskPushNotificationConfig": config}}  # fmt: skip
    # When it sends a message with it
    answer = rpc(url, "SendMessage", params)
    # Then the request is refused as invalid, naming the address, and no task was made
    assert error_code(answer) == -32602, answer
    assert "not a public address" in answer["error"]["message"]
    assert _tasks_in(url, context_id) == []


@pytest.mark.parametrize("address", METADATA_IN_IPV6)
def test_a_file_url_that_wraps_the_metadata_address_in_ipv6_is_refused(
    local_runtime: LocalRuntime, trust_agent: dict[str, threading.Event], address: str
) -> None:
    url = local_runtime.agent_url("t-trust")
    context_id = f"ctx-{uuid.uuid4()}"
    # Given a message whose file is a URL of the metadata service, wrapped in an IPv6 address, for the Runtime to fetch
    part = {"url": f"https://[{address}]/latest/meta-data/iam/security-credentials/", "mediaType": "image/png"}
    message = user_message("look", contextId=context_id)
    message["parts"].append(part)
    # When it is sent
    answer = rpc(url, "SendMessage", {"message": message})
    # Then it is refused before anything is written or fetched
    assert error_code(answer) == -32602, answer
    assert "not a public address" in answer["error"]["message"]
    assert _tasks_in(url, context_id) == []
